"""The trust region of the Bayesian optimizer: how far from the best configuration to search.

The half-width of the search box doubles when the GP predicted the energy of its
proposal well and halves when it did not, as in trust-region methods (J. Nocedal and
S. J. Wright, "Numerical Optimization", Springer (2006), algorithm 4.1, with the
GP's prediction in place of the quadratic model). Before a proposal is computed,
:func:`check_confident` asks whether the GP's own uncertainty leaves its predicted
drop in doubt, and the box then halves before any call is spent, as the
restricted-variance steps of G. Raggi, I. Fdez. Galván, C. L. Ritterhoff, M. Vacher
and R. Lindh, J. Chem. Theory Comput. 16, 3989 (2020) do.
"""

from dataclasses import dataclass, field

import numpy as np

from asebo.optimize.model_hessian import directional_curvature, interpolation_excess
from asebo.optimize.settings import TrustSettings


class UncertainStepError(RuntimeError):
    """The GP's predicted drop at a proposal lies within its own uncertainty there."""

    reason = "uncertain"  # as recorded in a proposal's ``retried``


class OverturnedCurvatureError(RuntimeError):
    """Along a proposed step the GP curves down where its prior curves up.

    Attributes
    ----------
    direction : ndarray (3n,)
        The unit step.
    excess : float
        eV/Å², the prior's curvature along it less the GP's (positive).
    """

    reason = "overturned"  # as recorded in a proposal's ``retried``

    def __init__(self, message, direction, excess):
        super().__init__(message)
        self.direction, self.excess = direction, excess


@dataclass(frozen=True)
class TrustRegion:
    """Half-width of the trust box, Å per coordinate, and its ceiling ``maxstep``.

    Immutable: :meth:`after` returns the region for the next step. ``settings``
    holds the factors and bounds (:class:`asebo.optimize.settings.TrustSettings`).
    """

    radius: float
    maxstep: float
    settings: TrustSettings = field(default=TrustSettings(), repr=False)

    def after(self, best, predicted, energy):
        """The region after a proposal predicted at ``predicted`` eV came out at ``energy``.

        Parameters
        ----------
        best : float
            Lowest energy observed before the proposal, eV.
        predicted, energy : float
            The GP's energy of the proposal (``best`` less the model's drop from its
            mean at the centre, :func:`check_confident`) and the calculator's, eV.

        Returns
        -------
        TrustRegion
        """
        predicted_drop = best - predicted
        actual_drop = best - energy
        error = abs(energy - predicted)
        if actual_drop > 0 and error < self.settings.good * max(predicted_drop, 0.0):
            return self._with_radius(min(self.settings.grow * self.radius, self.maxstep))
        if actual_drop <= 0 or error > predicted_drop:
            return self.shrunk()
        return self

    def shrunk(self):
        """The region halved (``settings.shrink``, down to ``settings.floor``): after a
        poor prediction, or where the model cannot be evaluated at the edge of the box."""
        return self._with_radius(max(self.settings.shrink * self.radius, self.settings.floor))

    def for_force_step(self):
        """The region of a step along the forces, when the model has nothing new to offer.

        The radius is at least ``settings.force_step``: a step shorter than that would
        teach the model as little as the proposal it replaces.
        """
        return self._with_radius(min(max(self.radius, self.settings.force_step), self.maxstep))

    @property
    def at_floor(self):
        """Whether the radius has reached ``settings.floor``."""
        return self.radius <= self.settings.floor

    def _with_radius(self, radius):
        return TrustRegion(radius, self.maxstep, self.settings)


def check_confident(gp, centre, proposal, confidence=TrustSettings.confidence):
    """Raise :class:`UncertainStepError` unless the GP is confident that ``proposal``
    lies below the box's centre, the lowest configuration computed.

    The predicted drop ``mu(centre) - mu(proposal)`` must be at least ``confidence``
    standard deviations ``sqrt(sigma^2(proposal) - sigma^2(centre))``: the variance
    the GP adds at the proposal beyond that at the centre, whose own variance (the
    noise the GP allows on the observations) is no uncertainty about the step. Were
    that the variance of the drop, a Gaussian posterior would put a step that passes
    ``confidence = 3`` below the centre with probability 0.998 or more. The drop is
    measured from the model's mean at the centre, not from the energy computed
    there: where the GP allows noise, a lowest energy below its mean (a step that
    gained a little from grid noise in DFT) would otherwise count against every
    proposal, and the box would halve down to its floor. A bound on the predicted
    variance restricts the steps of Raggi et al., J. Chem. Theory Comput. 16, 3989
    (2020); here the bound scales with the drop, so a short final step near a
    minimum passes where a long one of the same drop does not.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The fitted model.
    centre, proposal : ndarray (n, 3)
        The lowest configuration computed and the configuration proposed.
    confidence : float, optional
        Standard deviations the drop must reach (default 3,
        :class:`asebo.optimize.settings.TrustSettings`).

    Raises
    ------
    UncertainStepError
        When ``mu(centre) - mu(proposal) < confidence * sqrt(...)``.
    """
    mean, std = gp.predict(np.array([proposal, centre]), return_std=True)  # (2,), (2,)
    drop = mean[1] - mean[0]
    uncertainty = np.sqrt(max(std[0] ** 2 - std[1] ** 2, 0.0))
    if drop < confidence * uncertainty:
        raise UncertainStepError(
            f"the model's drop to its proposal, {drop:.3g} eV, is within {confidence:g} "
            f"standard deviations of its uncertainty there ({uncertainty:.3g} eV)"
        )


def check_curvature_supported(gp, centre, proposal, observations):
    """Raise :class:`OverturnedCurvatureError` where the GP's energy curves down along the
    step from ``centre`` to ``proposal``, its prior's curves up, and no configuration
    computed says the energy falls that way.

    The GP's curvature between few observations can turn negative by itself
    (:func:`asebo.optimize.model_hessian.evidence_of_descent`), and the search, which
    takes the direction the model promises most in, finds such directions first: in
    the hundreds of coordinates of a large molecule, on four of 77–113 atoms relaxed
    with GFN2-xTB, 34 of the 39 steps along which the model curved down at the centre
    went up (the 5 others gained 0.01 eV together), while the Lindh prior's curvature
    along the steps was 0.8–0.9 of the target's secant (median). The checks at
    convergence read such a curvature the same way
    (:func:`asebo.optimize.model_hessian.prior_where_interpolated`), and the search
    repeated after this error takes the prior's curvature along the step
    (:func:`asebo.optimize.search.search`). Where the prior curves down too (a prior
    calculator at a saddle) or is flat (a constant prior), the GP's curvature stands.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The fitted model.
    centre, proposal : ndarray (n, 3)
        The lowest configuration computed and the configuration proposed.
    observations : asebo.optimize.observations.Observations
        The configurations computed, ``centre`` among them.

    Raises
    ------
    OverturnedCurvatureError
        When the GP's curvature along the step at ``centre`` is negative, the prior's
        positive, and no observation shows a descent along it.
    """
    step = (proposal - centre).ravel()  # (3n,)
    length = np.linalg.norm(step)
    if length == 0.0:
        return
    direction = step / length
    model = directional_curvature(gp, centre, direction)
    excess = interpolation_excess(gp.prior, observations.arrays(), centre, direction, model)
    if excess is None:
        return
    raise OverturnedCurvatureError(
        f"along its step the model curves down ({model:.3g} eV/Å²) where its prior "
        f"curves up ({model + excess:.3g} eV/Å²) and no configuration computed falls",
        direction,
        excess,
    )
