r"""Kernels on configurations of ``n`` atoms: one object for the GP and for Gram matrices.

A configuration kernel is ``k(X, Z) = f(d(X, Z))``, a radial profile ``f``
(:mod:`asebo.kernels.radial`) of a squared distance ``d`` between two configurations
``X, Z`` of the same ``n`` atoms, ``(n, 3)`` positions in Å. Every kernel here has one
interface:

- :meth:`ConfigurationKernel.pair_geometry` gives the ``gamma``-free per-pair data
  (:class:`asebo.kernels.joint.PairGeometry`) from which the value and derivative
  blocks of the joint covariance of energies and gradients are built
  (:mod:`asebo.kernels.joint`, :mod:`asebo.kernels.operators`, :mod:`asebo.model.gp`);
- ``kernel(A, B)`` gives the ``(m, m')`` Gram matrix at the kernel's ``gamma``
  (the :class:`asebo.kernels.Kernel` interface: the energy block of that joint
  covariance), so the estimators of :mod:`asebo.learn.mlkrr`, :mod:`asebo.learn.iokr`,
  :mod:`asebo.learn.diffusion` and :mod:`asebo.learn.prediction` take molecular geometries.

:class:`SVDKernel` compares configurations after their optimal rigid alignment
(Wong and Kolter); :class:`CartesianKernel` compares raw positions (or the features
of a metric). :func:`configuration_kernel` turns the names of :data:`KERNELS` into
these objects.
"""

import inspect

import numpy as np
import torch

from asebo.kernels.euclidean import Kernel
from asebo.kernels.joint import PairGeometry
from asebo.kernels.radial import radial_profile
from asebo.kernels.svd import Alignment, _centre


class ConfigurationKernel(Kernel):
    """Base class: ``k = f(d)`` of a squared distance between configurations of the same atoms.

    Subclasses define :meth:`pair_geometry` and :attr:`centred`.

    Parameters
    ----------
    gamma : float
        Inverse squared length scale of the Gram matrix, ``k = exp(-gamma d / 2)`` for
        the squared exponential, Å⁻². :class:`asebo.model.gp.EnergyForceGP` does not use it:
        it fits its own from the ``gamma``-free :meth:`pair_geometry`.
    radial : {'se', 'matern52'} or profile
        ``f``: the squared exponential, the Matérn 5/2, or a profile object
        (:func:`asebo.kernels.radial.radial_profile`).
    """

    centred = False
    """Whether the kernel sees centred positions aligned pair by pair, which makes it
    invariant under rigid motions of either configuration."""

    def __init__(self, gamma=1.0, radial="se"):
        self.gamma = float(gamma)
        self.radial = radial_profile(radial)

    def pair_geometry(self, X, Z):
        """The :class:`asebo.kernels.joint.PairGeometry` of every pair of rows and columns.

        Parameters
        ----------
        X : float64 tensor (b, n, 3)
            Row configurations.
        Z : float64 tensor (m, n, 3)
            Column configurations.

        Returns
        -------
        PairGeometry
            ``b x m`` pairs, with this kernel's radial profile.
        """
        raise NotImplementedError

    def _prepare(self, X):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 2 and X.shape[1] % 3 == 0:
            X = X.reshape(len(X), -1, 3)  # (m, 3n) atom-major -> (m, n, 3)
        if X.ndim != 3 or X.shape[-1] != 3:
            raise ValueError(f"expected geometries of shape (m, n_atoms, 3), got {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("geometries contain NaN or inf positions")
        return X

    def _gram(self, X, Y):
        if X.shape[1] != Y.shape[1]:
            raise ValueError(
                f"geometries of {X.shape[1]} and {Y.shape[1]} atoms: a configuration "
                "kernel compares configurations of the same atoms"
            )
        geometry = self.pair_geometry(torch.from_numpy(X), torch.from_numpy(Y))
        return geometry.kernel(self.gamma).numpy()  # (m, m')

    def diag(self, X):
        """``f(0)`` for every configuration, shape ``(m,)``."""
        zeros = torch.zeros(len(self._prepare(X)), dtype=torch.float64)
        return self.radial(zeros, self.gamma)[0].numpy()


class SVDKernel(ConfigurationKernel):
    r"""The SVD kernel, ``k = f(d(X, Z))`` of the squared distance after the optimal rigid
    alignment (Wong and Kolter, eqs. 3 and 10).

    ``d = |X_c|^2 + |Z_c|^2 - 2 tr(G^T X_c^T Z_c)`` for the centred positions and the
    optimal alignment ``G`` (:mod:`asebo.kernels.svd`, one 3x3 SVD per pair), and
    ``f(d) = exp(-gamma d / 2)`` by default: invariant under rotations and
    translations of either configuration. ``kernel(X, Y)`` takes arrays of shape
    ``(m, n_atoms, 3)`` (or ``(m, 3 n_atoms)``, flattened atom-major).

    Parameters
    ----------
    gamma : float
        Inverse squared length scale of the Gram matrix, Å⁻².
    proper : bool
        Align by proper rotations only (smooth through planarity, the default) or by
        any orthogonal map (the paper's variant).
    radial : {'se', 'matern52'} or profile
        ``f`` (:mod:`asebo.kernels.radial`).

    References
    ----------
    E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning from
    geometric data", Carnegie Mellon University (preprint), eqs. 1-3 and 10, with the
    corrections in :mod:`asebo.kernels.svd`.
    """

    centred = True

    def __init__(self, gamma=1.0, proper=True, radial="se"):
        super().__init__(gamma, radial)
        if not isinstance(proper, bool):
            raise ValueError(f"proper must be True or False, got {proper!r}")
        self.proper = proper

    def pair_geometry(self, X, Z):
        Xc, Zc = _centre(X), _centre(Z)  # (b, n, 3), (m, n, 3)
        M = torch.einsum("ina,jnb->ijab", Xc, Zc)  # (b, m, 3, 3)
        alignment = Alignment(M, self.proper)
        trace = (alignment.G * M).sum(dim=(-1, -2))  # (b, m)
        distance = (
            (Xc**2).sum(dim=(-1, -2))[:, None] + (Zc**2).sum(dim=(-1, -2))[None] - 2.0 * trace
        ).clamp_min(0.0)
        return PairGeometry(
            Xc,
            Zc,
            distance,
            alignment.G,
            alignment.W,
            alignment.V,
            alignment.C,
            centred=self.centred,
            radial=self.radial,
        )


class CartesianKernel(ConfigurationKernel):
    r"""The Gaussian kernel on Cartesian positions, ``k = f(|X - Z|^2)``.

    Not invariant under rotations, so right for periodic systems, where the SVD
    kernel's alignment is meaningless, and for the features of a metric
    (:mod:`asebo.model.metric`), which are invariant themselves. Its per-pair data are
    those of the identity alignment without centring (``G = W = V = I``, ``C = 0``).
    With the squared exponential, ``kernel(X, Y)`` equals
    ``GaussianKernel(gamma / 2)`` on the flattened positions.

    Parameters
    ----------
    gamma : float
        Inverse squared length scale of the Gram matrix, Å⁻².
    radial : {'se', 'matern52'} or profile
        ``f`` (:mod:`asebo.kernels.radial`).
    """

    def pair_geometry(self, X, Z):
        b, m = X.shape[0], Z.shape[0]
        eye = torch.eye(3, dtype=X.dtype).expand(b, m, 3, 3)
        cross = torch.einsum("ina,jna->ij", X, Z)  # (b, m)
        distance = (
            (X**2).sum(dim=(-1, -2))[:, None] + (Z**2).sum(dim=(-1, -2))[None] - 2.0 * cross
        ).clamp_min(0.0)
        zeros = torch.zeros_like(eye)
        return PairGeometry(
            X, Z, distance, eye, eye, eye, zeros, centred=self.centred, radial=self.radial
        )


KERNELS = {"svd": SVDKernel, "cartesian": CartesianKernel}
"""The configuration kernels by name, for :func:`configuration_kernel`."""


def check_kernel(kernel):
    """``kernel`` itself if it is a :class:`ConfigurationKernel`, else a TypeError."""
    if not isinstance(kernel, ConfigurationKernel):
        raise TypeError(
            "kernel must be a configuration kernel, e.g. SVDKernel(proper=True) or "
            f"CartesianKernel(radial='matern52') (configuration_kernel makes one of "
            f"{sorted(KERNELS)} by name), got {kernel!r}"
        )
    return kernel


def configuration_kernel(kernel, **options):
    """The configuration kernel named ``kernel``, or ``kernel`` itself if it is one.

    Parameters
    ----------
    kernel : {'svd', 'cartesian'} or ConfigurationKernel
        A name of :data:`KERNELS` or a kernel object.
    **options
        With a name: passed to its class (``proper`` of :class:`SVDKernel`,
        ``radial``). With an object they belong to it, and are refused.

    Returns
    -------
    ConfigurationKernel
    """
    if isinstance(kernel, str):
        if kernel not in KERNELS:
            raise ValueError(
                f"kernel must be one of {sorted(KERNELS)} or a configuration kernel such as "
                f"SVDKernel(), got {kernel!r}"
            )
        accepted = set(inspect.signature(KERNELS[kernel]).parameters) - {"gamma"}
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise ValueError(
                f"the {kernel!r} kernel takes no {' or '.join(unknown)}: its options are "
                f"{', '.join(sorted(accepted))}"
            )
        return KERNELS[kernel](**options)
    check_kernel(kernel)
    if options:
        raise ValueError(
            f"{' and '.join(sorted(options))} belong to the kernel object: pass "
            f"{type(kernel).__name__}(..., {sorted(options)[0]}=...) alone"
        )
    return kernel


__all__ = [
    "ConfigurationKernel",
    "SVDKernel",
    "CartesianKernel",
    "KERNELS",
    "check_kernel",
    "configuration_kernel",
]
