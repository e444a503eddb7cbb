r"""A random scale on a calculator prior's curvature, as a kernel.

Two electronic-structure methods that agree on a molecule's shape often disagree on
its stiffness: GFN2-xTB's bonds and angles are softer or stiffer than PBE's by tens
of per cent, so the residual ``E - E_prior`` that a Δ-learning GP models curves like
the prior itself. A radial kernel learns that curvature one direction at a time; one
random number can carry it everywhere. The model gains the term ``beta h(u)`` with
``beta ~ N(0, c)`` and

.. math:: h(u) = E_p(u) - E_p(u_o) - \nabla E_p(u_o)^T (u - u_o),

the prior energy ``E_p`` without its value and slope at the origin ``u_o`` (the
lowest-energy observation, in the GP's features ``u``): the linear part is left to
the linear trend (:mod:`asebo.kernels.trend`), and at the origin ``h`` and its
gradient vanish, so one observation says nothing of ``beta`` and the first step is
the model's without it. This is the explicit basis function of Rasmussen and
Williams (*Gaussian Processes for Machine Learning*, MIT Press (2006), sec. 2.7,
eq. 2.39) with ``h`` the prior's curvature part. Per configuration the joint rows
are ``phi = (h, grad h)`` (d+1,), the kernel is ``c phi_u phi_z^T``: rank one over all
observations, and a product with its joint covariance costs ``O(m d)``
(:class:`asebo.kernels.trend.CovarianceWithTerm`).
"""

import torch


class PriorCurvature:
    r"""The rank-one kernel ``c phi_u phi_z^T`` of the prior's curvature part ``h``.

    Parameters
    ----------
    variance : float
        ``c``: the prior variance of the scale ``beta`` of ``h / scale``.
    origin_energy : float
        ``E_p(u_o)``.
    origin_gradient : tensor (d,)
        ``grad E_p(u_o)`` in the features.
    scale : float
        Divides ``h`` and its gradient (the root mean square of the prior's gradient
        components at the observations), so that ``variance`` is relative to the
        gradients the prior has.
    """

    def __init__(self, variance, origin_energy, origin_gradient, scale):
        self.variance = float(variance)
        self.origin_energy = float(origin_energy)
        self.origin_gradient = origin_gradient
        self.scale = float(scale)

    def with_variance(self, variance):
        """The same ``h`` with the scale's prior variance ``variance``."""
        return PriorCurvature(variance, self.origin_energy, self.origin_gradient, self.scale)

    def rows(self, features, energies, gradients):
        """``phi`` (b, d+1) of configurations at ``features`` (b, d) relative to the
        origin, with prior ``energies`` (b,) and feature ``gradients`` (b, d)."""
        energy = energies - self.origin_energy - features @ self.origin_gradient  # (b,)
        gradient = gradients - self.origin_gradient  # (b, d)
        return torch.cat([energy[:, None], gradient], dim=1) / self.scale

    def dense(self, rows, columns):
        """The joint covariance (b (d+1), m (d+1)) of ``rows`` (b, d+1) and ``columns``
        (m, d+1)."""
        return self.variance * torch.outer(rows.reshape(-1), columns.reshape(-1))

    def matmul(self, rows, columns, rhs):
        """The joint covariance of ``rows`` (b, d+1) and ``columns`` (m, d+1) times
        ``rhs`` (m (d+1), t): (b (d+1), t)."""
        return self.variance * rows.reshape(-1, 1) * (columns.reshape(-1) @ rhs)[None, :]

    def gradient_weights(self, columns, rhs):
        """The weights (t,) of each row's ``grad h / scale`` in the gradient rows of
        ``matmul(rows, columns, rhs)``, which depend on the rows only through it."""
        return self.variance * (columns.reshape(-1) @ rhs)

    def energy_rows(self, rows, columns):
        """Covariances (b, m (d+1)) of the row energies with the column energies and gradients."""
        return self.variance * rows[:, :1] * columns.reshape(1, -1)

    def prior_variance(self, rows):
        """``c h^2`` (b,) and its gradient ``2 c h grad h`` (b, d)."""
        return self.variance * rows[:, 0] ** 2, 2.0 * self.variance * rows[:, :1] * rows[:, 1:]
