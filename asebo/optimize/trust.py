"""The trust region of the Bayesian optimizer: how far from the best configuration to search.

The half-width of the search box doubles when the GP predicted the energy of its
proposal well and halves when it did not, as in trust-region methods (J. Nocedal and
S. J. Wright, "Numerical Optimization", Springer (2006), algorithm 4.1, with the
GP's prediction in place of the quadratic model). Before a proposal is computed,
:func:`check_confident` asks whether the GP's own uncertainty leaves its predicted
drop in doubt, and the box then halves before any call is spent, as the
restricted-variance steps of G. Raggi, I. Fdez. Galván, C. L. Ritterhoff, M. Vacher
and R. Lindh, J. Chem. Theory Comput. 16, 3989 (2020) do.

The predicted drop ``mu(centre) - mu(proposal)`` must be at least ``confidence``
standard deviations ``sqrt(sigma^2(proposal) - sigma^2(centre))``: the variance the GP
adds at the proposal beyond that at the centre, whose own variance (the noise the GP
allows on the observations) is no uncertainty about the step. Were that the variance
of the drop, a Gaussian posterior would put a step that passes ``confidence = 3``
below the centre with probability 0.998 or more. The drop is measured from the model's
mean at the centre, not from the energy computed there: where the GP allows noise, a
lowest energy below its mean (a step that gained a little from grid noise in DFT)
would otherwise count against every proposal, and the box would halve down to its
floor. A bound on the predicted variance restricts the steps of Raggi et al.; here the
bound scales with the drop, so a short final step near a minimum passes where a long
one of the same drop does not.

A refusal halves the box, which helps where the doubt grows faster than the drop with
the step's length: the curvature the observations leave open adds a standard
deviation growing as the square of the length. Where the doubt is the slope's own (the
noise the GP allows on the gradients at the centre, comparable to forces near
convergence), drop and doubt both grow as the length, no box is confident, and halving
only shortens every later step to the floor, each call gaining little, as predicted
(a GPAW run of CO on Cu(100) in docs/notes/noise-limited-confidence.md, "Why
the box halved in vain"). So the same step is checked again cut to half its length, a
quarter, and so on down to the smallest box, the lengths the halved boxes reach
(:func:`step_fractions`). Where none is confident, the shortest still goes down by the
model, and the drop is surer (more deviations) at a longer length than at the
shortest, the doubt is the slope's: :class:`SlopeNoiseError` gives the length where the
drop is surest, the search is repeated once in a box of that size, and its proposal
stands (:func:`asebo.optimize.search.search`). Where the drop is surest at the shortest
length, a smaller box is surer, and the box halves as before.
"""

from dataclasses import dataclass, field

import numpy as np

from asebo.optimize.model_hessian import directional_curvature, interpolation_excess
from asebo.optimize.settings import TrustSettings


class UncertainStepError(RuntimeError):
    """The GP's predicted drop at a proposal lies within its own uncertainty there."""

    reason = "uncertain"  # as recorded in a proposal's ``retried``


class SlopeNoiseError(RuntimeError):
    """The GP doubts its drop along a proposed step at every length down to the
    smallest box: the doubt is the noise on its slope, which no smaller box removes.

    Attributes
    ----------
    length : float
        Å, largest coordinate of the step where the drop is the most standard
        deviations of the model's uncertainty.
    """

    reason = "slope_noise"  # as recorded in a proposal's ``retried``

    def __init__(self, message, length):
        super().__init__(message)
        self.length = length


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

    def within(self, radius):
        """The region with its radius cut to ``radius`` Å, not below ``settings.floor``."""
        return self._with_radius(max(min(radius, self.radius), self.settings.floor))

    @property
    def at_floor(self):
        """Whether the radius has reached ``settings.floor``."""
        return self.radius <= self.settings.floor

    def _with_radius(self, radius):
        return TrustRegion(radius, self.maxstep, self.settings)


def check_confident(gp, centre, proposal, confidence=TrustSettings.confidence, shortest=None):
    """Raise :class:`UncertainStepError` unless the GP is confident that ``proposal``
    lies below the box's centre, the lowest configuration computed;
    :class:`SlopeNoiseError` where no shorter step along it could be either (the drop,
    its standard deviation and the shorter steps: the module's description).

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The fitted model.
    centre, proposal : ndarray (n, 3)
        The lowest configuration computed and the configuration proposed.
    confidence : float, optional
        Standard deviations the drop must reach (default 3,
        :class:`asebo.optimize.settings.TrustSettings`).
    shortest : float or None, optional
        Å: the smallest box (``TrustSettings.floor``); None checks ``proposal`` alone.

    Raises
    ------
    UncertainStepError
        When ``mu(centre) - mu(proposal) < confidence * sqrt(...)`` and the same step
        cut to a length between the proposal's and ``shortest`` would pass.
    SlopeNoiseError
        When none of these lengths passes, the shortest goes down by the model, and
        a longer one is surer than the shortest.
    """
    step = proposal - centre  # (n, 3)
    length = float(np.abs(step).max())
    fractions = step_fractions(length, shortest)  # (k,)
    points = [centre + f * step for f in fractions]  # (k, n, 3)
    drops, uncertainties = drops_and_uncertainties(gp, centre, points)  # (k,), (k,)
    confident = drops >= confidence * uncertainties  # (k,)
    if confident[0]:
        return
    doubt = (
        f"the model's drop to its proposal, {drops[0]:.3g} eV, is within {confidence:g} "
        f"standard deviations of its uncertainty there ({uncertainties[0]:.3g} eV)"
    )
    ratios = drops / np.maximum(uncertainties, np.finfo(float).tiny)  # (k,)
    surest = int(np.argmax(ratios))
    if confident.any() or drops[-1] <= 0.0 or surest == len(fractions) - 1:
        raise UncertainStepError(doubt)
    raise SlopeNoiseError(
        f"{doubt}, and so is it along the step cut down to {shortest:g} Å (at most "
        f"{ratios[surest]:.2g} deviations, at {fractions[surest] * length:.3g} Å)",
        fractions[surest] * length,
    )


def step_fractions(length, shortest):
    """The fractions (k,) of a step whose largest coordinate is ``length`` Å at which
    :func:`check_confident` checks it: 1, then halved down to the fraction that makes it
    ``shortest`` Å, the lengths the halved boxes reach; 1 alone where ``shortest`` is
    None. The last fraction ends the halving too: ``(shortest / length) * length`` can
    round above ``shortest``."""
    fractions = [1.0]
    last = shortest / length if shortest and length > 0.0 else 1.0
    while fractions[-1] > last and fractions[-1] * length > shortest:
        fractions.append(max(fractions[-1] / 2, last))
    return fractions


def drops_and_uncertainties(gp, centre, points):
    """The model's drops ``mu(centre) - mu(point)`` (k,) from ``centre`` (n, 3) to each
    of ``points`` (k, n, 3), and their uncertainties
    ``sqrt(sigma^2(point) - sigma^2(centre))`` (k,): standard deviations of the variance
    the GP adds there beyond that at the centre."""
    mean, std = gp.predict(np.array([centre, *points]), return_std=True)  # (1 + k,), (1 + k,)
    drops = mean[0] - mean[1:]  # (k,)
    uncertainties = np.sqrt(np.maximum(std[1:] ** 2 - std[0] ** 2, 0.0))  # (k,)
    return drops, uncertainties


def check_curvature_supported(gp, centre, proposal, observations):
    """Raise :class:`OverturnedCurvatureError` where the GP's energy curves down along the
    step from ``centre`` to ``proposal``, its prior's curves up, and no configuration
    computed says the energy falls that way.

    The GP's curvature between few observations can turn negative by itself
    (:func:`asebo.optimize.model_hessian.evidence_of_descent`), and the search, which
    takes the direction the model promises most in, finds such directions first, most
    of all in the hundreds of coordinates of a large molecule, where nearly every step
    along which the model curved down at the centre went up while the Lindh prior's
    curvature along the steps was near the target's (measured on four large
    molecules with GFN2-xTB: docs/notes/large-molecules.md, "Steps along a curvature
    only the interpolation gives"). The checks at
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
