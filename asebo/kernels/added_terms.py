r"""Kernel terms added to the GP's covariance, each with its inputs at the observations.

The GP's covariance is the configuration kernel plus a list of terms of explicit basis
functions (Rasmussen and Williams, *Gaussian Processes for Machine Learning*, MIT Press
(2006), sec. 2.7, eq. 2.39): a linear trend (:class:`asebo.kernels.trend.LinearTrend`)
and a random scale on a calculator prior's curvature
(:class:`asebo.kernels.prior_scale.PriorCurvature`). Every term offers the same
products (``dense``, ``matmul``, ``energy_rows``, ``prior_variance``); an
:class:`AddedTerm` binds one to what it takes of the observed configurations, and says
what it takes of a configuration to predict at (:meth:`AddedTerm.query`). The GP
treats the list alike in its dense factor, its structured solve and its posterior.
"""

import torch

from asebo.kernels.trend import CovarianceWithTerm


class AddedTerm:
    """A kernel term and its inputs at the observations.

    Parameters
    ----------
    kernel : LinearTrend or PriorCurvature
        The term, at its variance.
    inputs : tensor (m, k)
        What ``kernel`` takes of each observed configuration.
    """

    def __init__(self, kernel, inputs):
        self.kernel = kernel
        self.inputs = inputs

    def dense(self, select):
        """The term's joint covariance (N', N') of the ``select``-ed observations."""
        inputs = self.inputs[select]
        return self.kernel.dense(inputs, inputs)

    def around(self, covariance):
        """``covariance`` (a LinearOperator over every observation) plus this term."""
        return CovarianceWithTerm(covariance, self.kernel, self.inputs)

    def query(self, features, prior_energies):
        """The term's inputs (b, k) of configurations to predict at.

        Parameters
        ----------
        features : tensor (b, d)
            The configurations' features relative to the trend's origin.
        prior_energies : tensor (b,)
            The prior mean's energies there, offset included.
        """
        raise NotImplementedError

    def gradient_beyond_features(self, query, weights, near_weights, selected):
        """What the term adds to the gradients after the metric's pullback, or None.

        A term whose inputs depend on the configuration only through the features
        returns None: the pullback carries its gradient.
        """
        return None


class TrendTerm(AddedTerm):
    """The linear trend: its inputs are the features relative to the origin."""

    def query(self, features, prior_energies):
        return features


class CurvatureTerm(AddedTerm):
    r"""The prior's curvature part ``h``: its inputs are the rows ``phi = (h, grad h)``.

    At the observations ``grad h`` is taken in the features. At a configuration to
    predict at, the rows carry only ``-grad E_p(u_o)``: the prior's own gradient
    ``grad_x E_p`` is known in positions, and :meth:`gradient_beyond_features` adds it
    after the pullback.
    """

    def query(self, features, prior_energies):
        return self.kernel.rows(features, prior_energies, torch.zeros_like(features))

    def gradient_beyond_features(self, query, weights, near_weights, selected):
        r"""The weights of ``grad_x E_p / scale`` in the mean's and variance's gradients.

        Parameters
        ----------
        query : tensor (b, d+1)
            :meth:`query` at the configurations.
        weights : tensor (m (d+1), 1)
            The GP's weights of every observation.
        near_weights : tensor (N', b) or None
            ``(K + Lambda / s^2)^{-1} c`` of the configurations on the ``selected``
            observations; None where the variance is not wanted.
        selected : tensor (m',)

        Returns
        -------
        mean_weight : tensor (1,)
            Times ``grad h`` in the mean's gradient.
        variance_residual : tensor (b,) or None
            ``c h - c phi_near . w``: times ``2 s^2 grad h`` in the variance's gradient.
        """
        mean_weight = self.kernel.gradient_weights(self.inputs, weights)
        if near_weights is None:
            return mean_weight, None
        near = self.inputs[selected]
        residual = self.kernel.variance * query[:, 0] - self.kernel.gradient_weights(
            near, near_weights
        )
        return mean_weight, residual
