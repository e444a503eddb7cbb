r"""A linear trend in the features as a kernel: its joint covariance of energies and gradients.

A Gaussian process with the squared exponential kernel returns to its prior mean
within a length scale of the data: the slope it has learned does not carry beyond.
Adding ``E_trend(u) = beta^T u`` with a Gaussian slope ``beta ~ N(0, c I)`` makes
the model keep the slope it has seen everywhere: the explicit basis functions of
Rasmussen and Williams (*Gaussian Processes for Machine Learning*, MIT Press
(2006), sec. 2.7, eq. 2.39 with ``h(u) = u``), which for a vague prior (large
``c``) is universal kriging with a linear drift. Its kernel is the dot product
``k(u, z) = c u^T z`` of features ``u`` measured from an origin, with the blocks

.. math:: \mathrm{cov}(E_u, E_z) = c\, u^T z, \quad
          \mathrm{cov}(E_u, \nabla E_z) = c\, u, \quad
          \mathrm{cov}(\nabla E_u, E_z) = c\, z, \quad
          \mathrm{cov}(\nabla E_u, \nabla E_z) = c\, I,

so a product with the joint covariance of ``m`` configurations costs ``O(m d)``:
every row depends on the columns only through ``S = \sum_j (z_j e_j + v_j)``.
"""

import torch
from linear_operator.operators import LinearOperator


class LinearTrend:
    """The dot-product kernel ``c u^T z`` of a random slope, on features (b, d).

    Parameters
    ----------
    variance : float
        ``c``: the prior variance of each slope component.
    """

    def __init__(self, variance):
        self.variance = float(variance)

    def dense(self, X, Z):
        """The joint covariance (b (d+1), m (d+1)) of rows ``X`` (b, d) and columns ``Z`` (m, d),
        per configuration the energy and then the ``d`` gradient components."""
        b, d = X.shape
        m = Z.shape[0]
        out = X.new_zeros(b, d + 1, m, d + 1)
        out[:, 0, :, 0] = X @ Z.T
        out[:, 0, :, 1:] = X[:, None, :]
        out[:, 1:, :, 0] = Z.T[None]
        out[:, 1:, :, 1:] = torch.eye(d, dtype=X.dtype)[:, None, :]
        return self.variance * out.reshape(b * (d + 1), m * (d + 1))

    def matmul(self, X, Z, rhs):
        """The joint covariance of rows ``X`` (b, d) and columns ``Z`` (m, d) times ``rhs``
        (m (d+1), t): (b (d+1), t), in ``O((b + m) d t)``."""
        b, d = X.shape
        blocks = rhs.reshape(Z.shape[0], d + 1, -1)
        slope = Z.T @ blocks[:, 0] + blocks[:, 1:].sum(dim=0)  # (d, t): S
        energy = X @ slope  # (b, t)
        gradient = slope.expand(b, d, slope.shape[-1])
        return self.variance * torch.cat([energy[:, None], gradient], dim=1).reshape(
            b * (d + 1), -1
        )

    def energy_rows(self, X, Z):
        """Covariances (b, m (d+1)) of the row energies with the column energies and gradients."""
        b, m = X.shape[0], Z.shape[0]
        rows = torch.cat([(X @ Z.T)[..., None], X[:, None, :].expand(b, m, -1)], dim=-1)
        return self.variance * rows.reshape(b, -1)

    def prior_variance(self, X):
        """``c |u|^2`` (b,) and its gradient ``2 c u`` (b, d)."""
        return self.variance * (X**2).sum(dim=1), 2.0 * self.variance * X


class CovarianceWithTerm(LinearOperator):
    """A joint covariance plus a kernel term on the same configurations.

    Parameters
    ----------
    covariance : LinearOperator (m (d+1), m (d+1))
        Typically an :class:`asebo.kernels.operators.JointCovariance`, or another
        ``CovarianceWithTerm``.
    term : LinearTrend or asebo.kernels.prior_scale.PriorCurvature
        A kernel with a structured product ``term.matmul(inputs, inputs, rhs)``.
    inputs : tensor
        What ``term`` takes of the configurations: a :class:`LinearTrend` their
        features relative to the trend's origin (m, d), a ``PriorCurvature`` their
        rows ``phi`` (m, d+1).
    """

    def __init__(self, covariance, term, inputs):
        super().__init__(covariance, inputs, term=term)
        self.covariance = covariance
        self.term = term
        self.inputs = inputs

    @property
    def geometry(self):
        """The pair geometry of the covariance (for its block-Jacobi preconditioner)."""
        return self.covariance.geometry

    def _size(self):
        return self.covariance.shape

    def _transpose_nonbatch(self):
        return self

    def _matmul(self, rhs):
        column = rhs[:, None] if rhs.ndim == 1 else rhs
        out = self.covariance._matmul(column) + self.term.matmul(self.inputs, self.inputs, column)
        return out[:, 0] if rhs.ndim == 1 else out

    def matmul(self, other):
        """``self @ other`` by the structured products."""
        return self._matmul(other)
