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
  raised to the smallest vibrational one, and the scales normalised to a geometric
  mean of one.

The GP then takes the Gaussian kernel on ``\psi``: a kernel on features, so positive
semidefinite by construction, invariant to rotations and translations, with length
``1 / sqrt(gamma \lambda_i^{p})`` along Hessian eigenvector ``i``. An invariant
energy's gradient maps exactly: ``\nabla_a E = (\nabla_x E) G`` and
``\nabla_\psi E = \Lambda^{-p/2} U^T \nabla_a E``; gradients of functions of ``\psi``
are pulled back to ``x`` through the alignment by automatic differentiation.

Without alignment (``align=False``: periodic cells, coordinates fixed along axes, near
linear molecules, whose rotation about the axis is decided by small displacements)
``a = x``.
"""

import numpy as np
import torch

from asebo.kernels.svd import optimal_alignment

POWER = 0.5  # the metric is H^POWER: characteristic lengths go as lambda^(-POWER/2)
HESSIAN_STEP = 1e-4  # Å, central differences of the model forces


def model_hessian(model, positions, step=HESSIAN_STEP):
    """Hessian (3n, 3n) of ``model`` at ``positions`` (n, 3), eV/Å², by central differences
    of its forces.

    Parameters
    ----------
    model : object with ``energy_and_forces(positions) -> (energy, forces (n, 3))``
        A model such as :class:`asebo.lindh.LindhModel`.
    positions : array (n, 3)
    step : float
        Å.
    """
    x0 = np.asarray(positions, dtype=np.float64).reshape(-1)  # (3n,)
    hessian = np.empty((x0.size, x0.size))
    for i in range(x0.size):
        plus, minus = x0.copy(), x0.copy()
        plus[i] += step
        minus[i] -= step
        forces_plus = model.energy_and_forces(plus.reshape(-1, 3))[1].reshape(-1)
        forces_minus = model.energy_and_forces(minus.reshape(-1, 3))[1].reshape(-1)
        hessian[i] = (forces_minus - forces_plus) / (2.0 * step)
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
        raised to the smallest of the others.

    Returns
    -------
    array (3n, 3n)
    """
    eigenvalues, vectors = np.linalg.eigh(hessian)  # ascending
    vibrational = eigenvalues[rigid:] if len(eigenvalues) > rigid else eigenvalues[-1:]
    if vibrational.max() <= 0.0:  # no bonds: nothing to tell directions apart
        return np.eye(len(eigenvalues))
    floor = max(vibrational.min(), 1e-6 * vibrational.max())
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
