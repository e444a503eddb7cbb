"""The order of a saddle search's endpoint by the model, and the step where it is not one.

A walk that maximises along one mode and minimises along the others has zero gradient
at a saddle point of any order: at a second-order one its step vanishes, and the
forces alone end the search there. Where the forces are converged, the GP's Hessian
at the configuration (:func:`asebo.optimize.model_hessian.curvature_with_evidence`)
tells the order: a second negative curvature along which the prior calculator's own
curvature or a configuration computed also says the energy falls
(:func:`asebo.optimize.model_hessian.evidence_of_descent`) keeps the search going,
with a step along it to the model's lowest energy within the trust radius, both signs
tried (:func:`asebo.optimize.model_hessian.descent_along`), as
:class:`asebo.BOOptimizer` steps off a saddle point its forces converged on
(:func:`asebo.optimize.endpoint.descend_negative_curvature`). Unlike there, the
curvature need not be negative beyond the model's doubt: the order is what a saddle
search is asked for, and the evidence keeps the step from the GP's interpolation
alone. The walk on the model from the configuration computed there minimises along
that mode. Where no step is left, the search ends there: converged where the model has
one negative curvature (with its imaginary frequency, :func:`lowest_frequency`), not
converged where it has none (a minimum) or more than one; the log says how many
(:meth:`OrderVerdict.note`). A negative curvature beyond the lowest that nothing
supports and whose magnitude lies within the model's doubt (one posterior standard
deviation) is not counted: the model cannot tell its sign.
"""

from dataclasses import dataclass

import numpy as np
from ase import units

from asebo.optimize.model_hessian import (
    curvature_with_evidence,
    descent_along,
    mass_weighted_internal_basis,
)

IMAGINARY_THRESHOLD = 10.0
"""cm⁻¹: an imaginary frequency of a finite-difference Hessian above this is a mode,
below it noise (:mod:`asebo.barrier.modes`)."""

FLAT_CURVATURE = (IMAGINARY_THRESHOLD * units.invcm / (units._hbar * 1e10)) ** 2 * (
    units._e * units._amu
)
"""eV/Å², the curvature of a mode of :data:`IMAGINARY_THRESHOLD` at one atomic mass unit
(3.7e-4): a model whose one negative curvature is softer stands on a flat region (a free
atom far away), not at a saddle point. A curvature, not a frequency: the model's doubt
is in eV/Å² whatever the masses, and a cluster of heavy atoms held by weak bonds can
have saddle points below 10i cm⁻¹."""


@dataclass(frozen=True)
class OrderStep:
    """A step off an endpoint of converged forces that the model puts at a saddle point
    of order two or more.

    Attributes
    ----------
    positions : array (n, 3)
        Where to compute next.
    curvature : float
        eV/Å², the model's curvature along the mode followed.
    order : int
        The model's negative curvatures at the endpoint.
    """

    positions: np.ndarray
    curvature: float
    order: int

    def note(self):
        """The log's line."""
        return (
            f"the forces are converged, but the model has {self.order} negative "
            f"curvatures here and the second ({self.curvature:.3g} eV/Å²) is not the "
            "interpolation's alone: a step along it"
        )


@dataclass(frozen=True)
class OrderVerdict:
    """The model's order at an endpoint of converged forces, and the step off it.

    Attributes
    ----------
    curvatures : array (k,)
        The model's negative curvatures there, ascending, eV/Å².
    supported : int
        How many of them beyond the lowest the prior calculator or the calls support.
    step : OrderStep or None
        The step off the endpoint; None where the search ends there.
    imaginary : float or None
        cm⁻¹, the model's imaginary frequency where it has one negative curvature
        (:func:`lowest_frequency`); None elsewhere.
    mode : array (n, 3) or None
        The unit mode of that negative curvature; None elsewhere.
    flat : float or None
        cm⁻¹, the model's one imaginary frequency where its curvature is softer than
        :data:`FLAT_CURVATURE`: no negative curvature is counted (``order`` 0), a flat
        region's; None elsewhere.
    doubtful : int
        Negative curvatures beyond the lowest not counted: without support and within
        one standard deviation of zero.
    unknown : str or None
        Why the model's Hessian could not be read there (the prior calculator's failure
        near the configuration): no curvature is counted; None elsewhere.
    """

    curvatures: np.ndarray
    supported: int
    step: OrderStep | None
    imaginary: float | None = None
    mode: np.ndarray | None = None
    flat: float | None = None
    doubtful: int = 0
    unknown: str | None = None

    @property
    def order(self):
        """The model's number of negative curvatures: 1 at a first-order saddle point."""
        return len(self.curvatures)

    def note(self):
        """The log's line where the search ends at the endpoint."""
        values = ", ".join(f"{value:.3g}" for value in self.curvatures)
        if self.unknown is not None:
            return (
                f"the forces are converged, but the model's Hessian cannot be read here "
                f"({self.unknown}): the order is not known, not converged; check the "
                "endpoint's modes"
            )
        if self.order == 1:
            doubtful = (
                f"; {self.doubtful} more within the model's doubt of zero, not counted"
                if self.doubtful
                else ""
            )
            return (
                f"converged where the model has one negative curvature ({values} "
                f"eV/Å², {self.imaginary:.0f}i cm⁻¹{doubtful}): a first-order saddle point "
                "by the model"
            )
        if self.flat is not None:
            return (
                f"the forces are converged where the model's one negative curvature is "
                f"flat ({self.flat:.0f}i cm⁻¹, softer than {FLAT_CURVATURE:.1e} eV/Å²): not a "
                "saddle point, not converged; start from a guess nearer the transition state"
            )
        if not self.order:
            return (
                "the forces are converged where the model has no negative "
                "curvature, a minimum by the model: not converged; start from a guess "
                "nearer the transition state"
            )
        why = (
            "the search's steps off its endpoints are spent"
            if self.supported
            else "the second is the interpolation's alone"
        )
        return (
            f"the forces are converged where the model has {self.order} negative "
            f"curvatures ({values} eV/Å²; {why}): not converged; check the endpoint's modes"
        )


def judge_order(gp, observations, positions, free, masses, radius, steps_left, rotations=True):
    """The :class:`OrderVerdict` at ``positions``, whose forces are converged: a step
    along the lowest negative curvature of the model beyond the lowest that the evidence
    supports, where ``steps_left`` allows one.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to every one of ``observations``.
    observations : asebo.optimize.observations.Observations
        ``positions`` among them.
    positions : array (n, 3)
    free : bool array (n, 3)
        The coordinates no constraint holds; the translations are rigid motions where
        all are.
    masses : array (n,)
        amu, for the imaginary frequency.
    radius : float
        Å: the step's largest atomic move.
    steps_left : int
        The steps off an endpoint the search may still take.
    rotations : bool
        Whether the rotations are rigid motions too (a molecule's, about any atoms held;
        not a periodic system's: :func:`asebo.optimize.model_hessian.internal_basis`).
    """
    _, curvature = curvature_with_evidence(
        gp, observations, positions, free, rotations, gp.prior.is_calculator, False
    )
    negative = curvature.downward  # ascending: the first is the mode maximised
    supported = [index for index in negative[1:] if curvature.evidence[index]]
    counted = [
        index
        for k, index in enumerate(negative)
        if not k
        or curvature.evidence[index]
        or -curvature.curvatures[index] > curvature.uncertainties[index]
    ]
    step = None
    if supported and steps_left > 0:
        index = supported[0]
        moved = descent_along(gp, positions, curvature.modes[index], radius)
        if moved is not None:  # None: the prior calculator fails all along the mode
            step = OrderStep(moved, float(curvature.curvatures[index]), len(counted))
    imaginary = mode = None
    if len(counted) == 1:
        imaginary = -lowest_frequency(curvature.hessian, positions, masses, free, rotations)
        if -curvature.curvatures[counted[0]] < FLAT_CURVATURE:
            return OrderVerdict(np.zeros(0), 0, None, flat=imaginary)
        mode = np.reshape(curvature.modes[counted[0]], np.shape(positions))
    return OrderVerdict(
        curvature.curvatures[counted],
        len(supported),
        step,
        imaginary,
        mode,
        doubtful=len(negative) - len(counted),
    )


def lowest_frequency(hessian, positions, masses, free, rotations=True):
    """The lowest harmonic frequency of ``hessian`` (3n, 3n), eV/Å², in cm⁻¹, negative
    where imaginary: its mass-weighted eigenvalues in the free coordinates, less the
    rigid motions that leave the held ones in place (the translations, and the rotations
    with ``rotations``: :func:`asebo.optimize.model_hessian.internal_basis`), as
    :mod:`ase.vibrations` converts them.

    Parameters
    ----------
    hessian : array (3n, 3n)
    positions : array (n, 3)
    masses : array (n,)
        amu.
    free : bool array (n, 3)
    """
    basis = mass_weighted_internal_basis(positions, masses, rotations, free)  # (3n, k)
    weights = np.repeat(np.sqrt(np.asarray(masses, dtype=float)), 3)  # (3n,)
    lowest = np.linalg.eigvalsh(basis.T @ (hessian / np.outer(weights, weights)) @ basis)[0]
    to_energy = units._hbar * 1e10 / np.sqrt(units._e * units._amu)  # eV per sqrt(eV/Å²/amu)
    return float(np.sign(lowest) * to_energy * np.sqrt(abs(lowest)) / units.invcm)
