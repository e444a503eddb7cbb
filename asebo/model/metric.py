r"""An anisotropic metric for the GP from a model Hessian: stiff and soft directions apart.

A Gaussian kernel with one length scale correlates a stiff bond stretch over the same
distance as a soft torsion, while the energy changes along the first a hundred
times faster. Raggi et al. (J. Chem. Theory Comput. 16, 3989 (2020)) give each
direction its own characteristic length from the eigenvalues of the model (Lindh)
Hessian. :class:`HessianMetric` does this in Cartesian space:

- each configuration ``x`` (n, 3) is centred and rotated onto a reference
  configuration ``x_ref`` (the optimal proper rotation ``G``, Wong and Kolter,
  Theorem 1): ``a = (x - \bar x) G``, so the features do not change under rigid
  motions;
- the aligned positions are scaled along the eigenvectors ``U`` of the model
  Hessian ``H = U \Lambda U^T`` at ``x_ref``: ``\psi = \Lambda^{p/2} U^T a`` with
  ``p = 1/2`` by default, the rigid-motion eigenvalues (zero for an invariant model)
  raised to the smallest vibrational one, every eigenvalue to at least a thousandth
  of the largest (the model leaves the motions of the molecules of a complex almost
  free), and the scales normalised to a geometric mean of one.

The GP then takes the Gaussian kernel on ``\psi``: a kernel on features, so positive
semidefinite by construction, invariant to rotations and translations, with length
``1 / sqrt(gamma \lambda_i^{p})`` along Hessian eigenvector ``i``. An invariant
energy's gradient maps exactly: ``\nabla_a E = (\nabla_x E) G`` and
``\nabla_\psi E = \Lambda^{-p/2} U^T \nabla_a E``; gradients of functions of ``\psi``
are pulled back to ``x`` through the alignment by automatic differentiation.

Without alignment (``align=False``: periodic cells, coordinates fixed along axes, near
linear molecules, whose rotation about the axis is decided by small displacements)
``a = x``.

:class:`InternalMetric` (the optimizer's default for molecules) takes the same
scales along curvilinear coordinates instead: the delocalized internal coordinates
of the Lindh model's stretches, bends and torsions, which agree with
``\Lambda^{p/2} U^T (x - x_ref)`` to first order and follow rotations about bonds
beyond it. Both give the GP ``(n, 3)`` features and the maps of gradients to and
from them.

A metric, here or elsewhere (a periodic one, say), is any object with

- ``features(positions)``: features (m, k, 3) of positions (m, n, 3) (k = n here,
  fewer for a periodic metric, which leaves out the fixed atoms);
- ``feature_gradients(positions, gradients)``: gradients (m, k, 3) in the features
  of functions whose gradients in the positions (m, n, 3) are ``gradients``;
- ``features_and_pullback(positions)``: features (b, k, 3) and a function that maps
  any number of gradients in the features (b, k, 3) back to the positions (b, n, 3);
- ``invariant``: whether the features are invariant to rigid motions (translations
  and rotations of the whole), which decides whether the optimizer moves a
  converged shape rigidly (:mod:`asebo.optimize.stages`).
"""

import numpy as np
import torch

from asebo.kernels.svd import optimal_alignment
from asebo.model.internals import PrimitiveInternals, bend_angles
from asebo.model.lindh import BONDED, lindh_weights, out_of_plane_quadruples
from asebo.model.straightness import NEARLY_STRAIGHT

POWER = 0.5  # the metric is H^POWER: characteristic lengths go as lambda^(-POWER/2)
# eigenvalues below this fraction of the largest are raised to it: directions the model
# leaves (almost) free, like the motions of one molecule against another in a complex,
# get a length scale at most FLOOR^(-POWER/2) = 5.6 times the stiffest one's
EIGENVALUE_FLOOR = 1e-3
HESSIAN_STEP = 1e-4  # Å, central differences of the model forces
STRAIGHT_BEND = NEARLY_STRAIGHT.left_out_bend  # bends this wide are left out of the features
LINEAR_BOND_ANGLE = NEARLY_STRAIGHT.bonded_bend_limit  # a bonded bend this wide: no features
PSEUDO_INVERSE_RTOL = 1e-10  # of the map from position to feature gradients
RANK_TOLERANCE = 1e-6  # smallest kept singular value of the weighted B matrix / largest


def model_hessian(model, positions, step=HESSIAN_STEP, batch=64):
    """Hessian (3n, 3n) of ``model`` at ``positions`` (n, 3), eV/Å², by central differences
    of its gradients.

    Parameters
    ----------
    model : object with ``energies_and_gradients(positions (b, n, 3))``
        A model such as :class:`asebo.model.lindh.LindhModel`, which returns energies
        (b,) and gradients (b, n, 3).
    positions : array (n, 3)
    step : float
        Å.
    batch : int
        Displaced configurations per call of the model: bounds its memory.
    """
    x0 = np.asarray(positions, dtype=np.float64)
    size = x0.size
    shifts = step * np.eye(size).reshape(size, *x0.shape)  # (3n, n, 3)
    displaced = np.concatenate([x0 + shifts, x0 - shifts])  # (6n, n, 3)
    gradients = np.concatenate(
        [
            model.energies_and_gradients(displaced[start : start + batch])[1]
            for start in range(0, len(displaced), batch)
        ]
    ).reshape(2, size, size)
    hessian = (gradients[0] - gradients[1]) / (2.0 * step)
    return 0.5 * (hessian + hessian.T)


def metric_factor(hessian, power=POWER, rigid=6):
    """``L`` (3n, 3n) with ``L^T L`` the normalised ``H^power``: ``psi = L a``.

    Parameters
    ----------
    hessian : array (3n, 3n)
        Symmetric model Hessian.
    power : float
        0 gives the identity (an isotropic metric).
    rigid : int
        The number of smallest eigenvalues that belong to rigid motions (6, or 5
        for a linear molecule); they and any smaller vibrational eigenvalue are
        raised to the smallest of the others, and every eigenvalue to at least
        :data:`EIGENVALUE_FLOOR` times the largest.

    Returns
    -------
    array (3n, 3n)
    """
    eigenvalues, vectors = np.linalg.eigh(hessian)  # ascending
    vibrational = eigenvalues[rigid:] if len(eigenvalues) > rigid else eigenvalues[-1:]
    if vibrational.max() <= 0.0:  # no bonds: nothing to tell directions apart
        return np.eye(len(eigenvalues))
    floor = max(vibrational.min(), EIGENVALUE_FLOOR * vibrational.max())
    scales = np.clip(eigenvalues, floor, None) ** power
    scales /= np.exp(np.mean(np.log(scales)))  # geometric mean 1: gamma keeps its meaning
    return np.sqrt(scales)[:, None] * vectors.T


class HessianMetric:
    """Features ``psi = L (x - x̄) G`` of configurations: aligned onto a reference and
    scaled by a model Hessian.

    Parameters
    ----------
    reference : array (n, 3)
        Configuration the others are aligned onto, where the Hessian was taken.
    hessian : array (3n, 3n)
        Model Hessian at ``reference``.
    power : float
        The metric is the Hessian to this power (:func:`metric_factor`).
    align : bool
        Centre and rotate onto the reference; False uses the positions as they are.
    """

    def __init__(self, reference, hessian, power=POWER, align=True):
        reference = np.asarray(reference, dtype=np.float64)
        self.align = align
        self.reference = torch.as_tensor(reference - reference.mean(axis=0) if align else reference)
        self.factor = torch.as_tensor(metric_factor(hessian, power))  # (3n, 3n)
        self.inverse = torch.linalg.inv(self.factor)  # (3n, 3n)

    @property
    def invariant(self):
        """Whether the features are invariant to rigid motions: with alignment."""
        return self.align

    @classmethod
    def from_model(cls, model, reference, power=POWER, align=True):
        """The metric of ``model``'s Hessian at ``reference`` (n, 3)."""
        return cls(reference, model_hessian(model, reference), power, align)

    def _aligned(self, x):
        """Aligned positions (m, n, 3) and rotations (m, 3, 3) of ``x`` (m, n, 3).

        Differentiable in ``x`` by autograd."""
        if not self.align:
            return x, None
        centred = x - x.mean(dim=1, keepdim=True)
        rotation = optimal_alignment(centred.transpose(-1, -2) @ self.reference)  # (m, 3, 3)
        return centred @ rotation, rotation

    def features(self, positions):
        """``psi`` (m, n, 3) of positions (m, n, 3)."""
        x = torch.as_tensor(positions, dtype=torch.float64)
        with torch.no_grad():
            aligned, _ = self._aligned(x)
        return (aligned.reshape(len(x), -1) @ self.factor.T).reshape(x.shape)

    def feature_gradients(self, positions, gradients):
        """Gradients (m, n, 3) in ``psi`` of invariant functions whose gradients in ``x``
        at ``positions`` (m, n, 3) are ``gradients`` (m, n, 3)."""
        x = torch.as_tensor(positions, dtype=torch.float64)
        g = torch.as_tensor(gradients, dtype=torch.float64)
        if self.align:
            with torch.no_grad():
                _, rotation = self._aligned(x)
            g = g @ rotation  # the gradient of E(y) at y = x_c G is grad E(x) G
        return (g.reshape(len(x), -1) @ self.inverse).reshape(x.shape)

    def features_and_pullback(self, positions):
        """``psi`` (b, n, 3) of positions (b, n, 3), and the map of gradients in ``psi``
        (b, n, 3) to gradients in ``x`` (b, n, 3)."""
        x = torch.as_tensor(positions, dtype=torch.float64).detach().requires_grad_(self.align)
        b = len(x)
        with torch.enable_grad():
            aligned, _ = self._aligned(x)
        features = (aligned.detach().reshape(b, -1) @ self.factor.T).reshape(x.shape)

        def pullback(*feature_gradients):
            in_aligned = [
                (g.reshape(b, -1) @ self.factor).reshape(x.shape) for g in feature_gradients
            ]
            if not self.align:
                return tuple(in_aligned)
            return tuple(
                torch.autograd.grad(aligned, x, g, retain_graph=True)[0] for g in in_aligned
            )

        return features, pullback


class InternalMetric:
    r"""Curvilinear features of configurations: internal coordinates scaled by a model Hessian.

    The primitives ``p(x)`` are the stretches, bends and torsions of a
    :class:`asebo.model.lindh.LindhModel` (torsions relative to the reference), with the
    model's force constants ``k``; at the reference its Hessian is
    ``H = B^T K B = U \Sigma^2 U^T`` with ``K^{1/2} B = V \Sigma U^T`` (thin SVD, the
    ``3n - 6`` vibrations). The features are the delocalized internal coordinates
    (Baker, Kessi and Delley, J. Chem. Phys. 105, 192 (1996)) of this weighted set,

    .. math:: \psi(x) = S \Sigma^{-1} V^T K^{1/2} (p(x) - p_{\mathrm{ref}}),
              \qquad S = \Sigma^{p} / \text{geometric mean},

    which to first order around the reference are :class:`HessianMetric`'s
    ``S U^T (x - x_ref)``, and beyond it follow the bonds, angles and torsions: a
    methyl group turned by 60° is a straight line in ``psi``, not an arc. They are
    invariant to rigid motions by construction (no alignment), padded with six zeros
    to ``(n, 3)`` so the GP sees ``3n`` features. An invariant energy's gradient maps
    exactly: ``\nabla_x E = J^T \nabla_\psi E`` with ``J = S \Sigma^{-1} V^T K^{1/2} B``
    of full row rank, so ``\nabla_\psi E = (J J^T)^{-1} J \nabla_x E``.

    Parameters
    ----------
    model : asebo.model.lindh.LindhModel
        Its terms and force constants define the primitives and their weights.
    reference : array (n, 3)
        Where the weighted B matrix is decomposed (the model's reference).
    power : float
        The metric is ``H^power`` to first order; 0 weighs every delocalized
        coordinate alike.

    Attributes
    ----------
    model : asebo.model.lindh.LindhModel
        The model the metric is built from.

    Raises
    ------
    ValueError
        When the primitives do not span the ``3n - 6`` vibrations at the reference
        (a near-linear molecule, two atoms): take :class:`HessianMetric` there.

    References
    ----------
    R. Raggi et al., J. Chem. Theory Comput. 16, 3989 (2020) (a length per direction
    from the model Hessian); J. Baker, A. Kessi, B. Delley, J. Chem. Phys. 105, 192
    (1996) (delocalized internal coordinates); A. Meyer and A. W. Hauser, J. Chem.
    Phys. 152, 084112 (2020) (GP regression in internal coordinates).
    """

    invariant = True  # to rigid motions, by construction

    def __init__(self, model, reference, power=POWER):
        self.model = model
        reference = np.asarray(reference, dtype=np.float64)
        n = len(reference)
        vibrations = 3 * n - 6
        if vibrations < 1:
            raise ValueError(f"{n} atoms have no bends to describe in internal coordinates")
        rho = lindh_weights(reference, model.numbers)  # (n, n)
        bends = np.asarray(model.bends).reshape(-1, 3)
        straight = _straight_bends(reference, bends, rho)  # (b,)
        # out-of-plane dihedrals of every atom with three neighbours: they, not the
        # bends, move first when a planar centre puckers
        out_of_plane, weights = out_of_plane_quadruples(rho, model.cutoff)
        self.primitives = PrimitiveInternals(
            model.stretches, bends[~straight], model.torsions, out_of_plane, reference
        )
        constants = np.concatenate(
            [
                model.stretch_constants,
                model.bend_constants[~straight],
                model.torsion_constants,
                model.torsion_constant * weights,
            ]
        )  # (d,)
        values, derivatives = self.primitives.values_and_derivatives(
            torch.as_tensor(reference)[None]
        )
        wilson_b = self.primitives.wilson_b(derivatives)[0].numpy()  # (d, 3n)
        transform, scales = _delocalized_transform(wilson_b, constants, vibrations, power)
        self.transform = torch.as_tensor(transform)  # (r, d): psi = (p - p_ref) @ A^T
        self.reference_values = values[0]  # (d,)
        self.n_atoms, self.rank = n, vibrations
        # the Jacobian at the reference is diag(scales) U^T: its singular values are the scales
        self._reference_smallest = float(scales.min())
        self._conditioning = {}  # positions bytes -> conditioning of a configuration seen
        self._known = {}  # positions bytes -> (r,) features of a configuration seen
        self._mapped = {}  # (positions, gradient) bytes -> (r,) gradient in psi
        self._last_map = (None, None)  # (positions bytes, (r, 3n) map) of the latest configuration

    @classmethod
    def from_model(cls, model, reference, power=POWER):
        """The metric of ``model`` at ``reference`` (n, 3)."""
        return cls(model, reference, power)

    def _features(self, x):
        """Unpadded features (b, r) and primitive derivatives (b, d, 4, 3) of x (b, n, 3)."""
        values, derivatives = self.primitives.values_and_derivatives(x)
        return (values - self.reference_values) @ self.transform.T, derivatives

    def _pad(self, features):
        out = features.new_zeros(len(features), 3 * self.n_atoms)
        out[:, : self.rank] = features
        return out.reshape(len(features), self.n_atoms, 3)

    def features(self, positions):
        """``psi`` (m, n, 3) of positions (m, n, 3), the last six entries zero.

        The features of each configuration are computed once, and alone: a GP asks for
        those of every observation at every fit, and ``r`` numbers a configuration are
        cheap to keep where recomputing them costs ``O(m)`` time and memory per fit;
        computed one by one they do not depend on which others came in the same call,
        so a resumed run sees the very numbers of the uninterrupted one.
        """
        x = torch.as_tensor(positions, dtype=torch.float64)
        keys = [xi.numpy().tobytes() for xi in x]
        for xi, key in zip(x, keys):
            if key not in self._known:
                self._known[key] = self._features(xi[None])[0][0]
        return self._pad(torch.stack([self._known[key] for key in keys]))

    def conditioning(self, positions):
        """How well the features describe every vibration at ``positions`` (n, 3): the
        smallest singular value of their Jacobian ``J = d psi / d x`` there over that at
        the reference.

        1 at the reference. It falls towards 0 where the features fold: a planar
        centre relaxed from a pyramidal start, for one, passes a flat configuration
        where its bends reach their largest sum and stop telling which way it
        puckers. There a gradient maps to ``psi`` through ``(J^T)^+`` with a
        near-zero singular value, and the features of configurations on both sides of
        the fold coincide. Each configuration's value is computed once.
        """
        x = torch.as_tensor(positions, dtype=torch.float64)
        key = x.numpy().tobytes()
        if key not in self._conditioning:
            smallest = float(torch.linalg.svdvals(self._jacobian(x))[-1])
            self._conditioning[key] = smallest / self._reference_smallest
        return self._conditioning[key]

    def _jacobian(self, x):
        """``J = d psi / d x`` (r, 3n) at one configuration x (n, 3)."""
        _, derivatives = self.primitives.values_and_derivatives(x[None])
        return self.primitives.left_product(self.transform, derivatives)

    def _gradient_map(self, x):
        """``(J J^T)^{-1} J = (J^T)^+`` (r, 3n) at one configuration x (n, 3)."""
        # a pseudo-inverse where a faded torsion has taken a direction away
        return torch.linalg.pinv(self._jacobian(x).T, rtol=PSEUDO_INVERSE_RTOL)

    def _feature_gradient(self, x, g):
        """``(J^T)^+ g`` (r,) at one configuration x (n, 3), g (3n,).

        Each pair is computed once (an optimizer maps the same observed and prior
        gradients at every fit), and the map of the latest configuration is kept, not
        every map: ``r x 3n`` numbers a configuration would grow to hundreds of MB for a
        hundred atoms and a few hundred observations.
        """
        key = x.numpy().tobytes()
        pair = (key, g.numpy().tobytes())
        if pair not in self._mapped:
            if self._last_map[0] != key:
                self._last_map = (key, self._gradient_map(x))
            self._mapped[pair] = self._last_map[1] @ g
        return self._mapped[pair]

    def feature_gradients(self, positions, gradients):
        """Gradients (m, n, 3) in ``psi`` of invariant functions whose gradients in ``x``
        at ``positions`` (m, n, 3) are ``gradients`` (m, n, 3).

        Meant for observations, which come back at every fit: each mapped gradient is
        stored.
        """
        x = torch.as_tensor(positions, dtype=torch.float64)
        g = torch.as_tensor(gradients, dtype=torch.float64).reshape(len(x), -1)
        return self._pad(torch.stack([self._feature_gradient(xi, gi) for xi, gi in zip(x, g)]))

    def features_and_pullback(self, positions):
        """``psi`` (b, n, 3) of positions (b, n, 3), and the map of gradients in ``psi``
        (b, n, 3) to gradients in ``x`` (b, n, 3), ``J^T g``."""
        x = torch.as_tensor(positions, dtype=torch.float64)
        features, derivatives = self._features(x)
        b = len(x)

        def pullback(*feature_gradients):
            return tuple(
                self.primitives.transpose_product(
                    derivatives, g.reshape(b, -1)[:, : self.rank] @ self.transform
                )
                for g in feature_gradients
            )

        return self._pad(features), pullback


def _straight_bends(reference, bends, rho):
    """Which ``bends`` (b, 3) are too wide at ``reference`` (n, 3) to be features, (b,).

    Raises
    ------
    ValueError
        Where a bend of two bonds (Lindh weights ``rho`` (n, n) above :data:`BONDED`)
        is close to straight: an sp atom, whose angle is no smooth coordinate.
    """
    angles = bend_angles(torch.as_tensor(reference), torch.as_tensor(bends))[0].numpy()
    i, j, k = bends.T
    bonded = (rho[i, j] > BONDED) & (rho[j, k] > BONDED)
    if np.any(bonded & (angles >= LINEAR_BOND_ANGLE)):
        raise ValueError(
            "a bond angle is close to 180° (an sp atom), where the angle is no smooth coordinate"
        )
    return angles >= STRAIGHT_BEND


def _delocalized_transform(wilson_b, constants, vibrations, power):
    """The map ``A = S Sigma^{-1} V^T K^{1/2}`` (r, d) of primitives to delocalized
    coordinates, and the scales ``S`` (r,), from the thin SVD of ``K^{1/2} B``.

    Parameters
    ----------
    wilson_b : array (d, 3n)
        Derivatives ``B`` of the primitives at the reference.
    constants : array (d,)
        Force constants ``K`` of the primitives.
    vibrations : int
        ``r = 3n - 6``, the singular vectors kept.
    power : float
        ``S = Sigma^power`` normalised to a geometric mean of one.

    Raises
    ------
    ValueError
        When the weighted primitives do not span ``vibrations`` directions.
    """
    weighted = np.sqrt(constants)[:, None] * wilson_b
    V, sigma, _ = np.linalg.svd(weighted, full_matrices=False)
    if len(sigma) < vibrations or sigma[vibrations - 1] < RANK_TOLERANCE * sigma[0]:
        raise ValueError(
            "the internal coordinates do not describe every vibration at this "
            "configuration (near-linear molecule?)"
        )
    sigma, V = sigma[:vibrations], V[:, :vibrations]
    scales = sigma**power
    scales /= np.exp(np.mean(np.log(scales)))
    return (scales / sigma)[:, None] * V.T * np.sqrt(constants), scales
