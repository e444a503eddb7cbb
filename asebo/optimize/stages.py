"""The special cases of a step, each a named stage that may replace the model's proposal.

One step of :class:`asebo.BOOptimizer` is: fit the model, choose where the search
starts (:func:`search_starts`), search (:func:`asebo.optimize.search.search`), then
offer the proposal to the stages of :data:`STAGES` in order. A stage returns None
where its case does not hold, or a new :class:`asebo.optimize.proposal.Proposal` with
its own ``reason``, which ends the step. Where none holds, the model's proposal
stands. Each stage reads a :class:`asebo.optimize.proposal.StepContext` and writes
nothing; its note for the log travels with the proposal.

- :func:`step_along_forces` (``'force_step'``): the search failed, or sends the run
  back to a configuration already computed, which would teach the model nothing.
- :func:`move_rigidly` (``'rigid_move'``): a rotation-invariant model predicts forces
  without net force or torque, but a calculator on a real-space grid returns them
  with some (the egg-box effect); where only those keep the lowest configuration
  from converging, the proposal also moves as a whole along them
  (:mod:`asebo.optimize.rigid`).

Each stage, the extra starts of :func:`search_starts` and each length rule of
:func:`force_step` turn off alone in ``settings.rules``
(:class:`asebo.optimize.settings.Rules`).
"""

from dataclasses import replace

import numpy as np

from asebo.model.priors import PriorCalculationError
from asebo.optimize.model_hessian import (
    directional_curvature,
    internal_basis,
    posterior_hessian,
)
from asebo.optimize.proposal import FORCE_STEP, RIGID_MOVE
from asebo.optimize.rigid import moved_rigidly, rigid_part, rigid_step


def search_starts(context):
    """Where the search starts, a list of arrays (n, 3): the lowest configuration
    computed, and the latest one when it is another."""
    centre, observations = context.centre, context.observations
    latest = context.settings.rules.latest_start and context.best != len(observations) - 1
    return [centre, observations.positions[-1]] if latest else [centre]


def step_along_forces(context, proposal):
    """A step along the forces of the lowest configuration (``'force_step'``) where every
    search failed or the model's proposal was computed already.

    The trust region widens to at least ``settings.trust_region.force_step``.
    """
    if proposal.positions is not None and context.is_new(proposal.positions):
        return None
    widened = context.settings.rules.force_step_radius
    trust = proposal.trust.for_force_step() if widened else proposal.trust
    positions = force_step(context, trust.radius)
    return replace(
        _replaced(proposal, positions, context.predicted(positions), FORCE_STEP), trust=trust
    )


def move_rigidly(context, proposal):
    """The model's proposal also moved as a whole along the net force and torque of the
    lowest configuration (``'rigid_move'``), where only they keep it from converging.

    The model, blind to rigid motions, cannot remove them. The largest atomic move is
    ``force_step``, times ``special_cases.rigid_shrink`` for every call since the lowest
    energy was found: a grid's ripple can make the full step overshoot, and the same
    step from the same configuration would overshoot again.
    """
    if not (context.rigid_left and context.settings.rules.rigid_move):
        return None
    observations, best = context.observations, context.best
    length = context.settings.trust_region.force_step * (
        context.settings.special_cases.rigid_shrink ** (len(observations) - 1 - best)
    )
    translation, rotation = rigid_step(context.centre, observations.forces[best], length)
    positions = moved_rigidly(proposal.positions, translation, rotation)
    note = (
        "the forces without their net force and torque meet fmax: the "
        f"proposal also moves rigidly along them, {length:.3g} Å at most"
    )
    return _replaced(proposal, positions, context.predicted(positions), RIGID_MOVE, note)


STAGES = (step_along_forces, move_rigidly)
"""The stages in the order they are offered the proposal; the first that replaces it
ends the step."""


def _replaced(proposal, positions, predicted, reason, note=None):
    """``proposal`` with new positions, predicted energy and reason, and ``note`` added."""
    notes = proposal.notes if note is None else (*proposal.notes, note)
    return replace(
        proposal, positions=positions, predicted_energy=predicted, reason=reason, notes=notes
    )


class NoProgressError(RuntimeError):
    """No configuration along the forces of the lowest one is left to compute: the
    step the model's quadratic asks for was computed already, and came out no lower."""

    def note(self, forces):
        """The log's line of a run that stops here; ``forces`` (N, 3): the free forces
        at the lowest configuration, eV/Å."""
        largest = np.linalg.norm(forces, axis=1).max()
        return (
            f"the forces at the lowest configuration ({largest:.2g} eV/Å) are at the "
            f"calculator's noise level ({self}): the run stops unconverged, the lowest "
            "configuration computed kept in the atoms"
        )


def force_step(context, length):
    """A configuration not computed yet along the free forces of the lowest one (their
    projection onto the constraints' subspace where there is one).

    The largest atomic step is ``length``, or else halved until it reaches a
    configuration not computed before. Where the step to the
    minimum of the model's quadratic along the forces (:func:`newton_length`) is
    shorter than the trust region's floor, no box holds it: the step is the model's
    Newton step (:func:`newton_step`), or that one along the forces, whichever first
    lies beyond :data:`asebo.optimize.observations.SAME_POSITIONS` of every
    configuration.

    Raises
    ------
    NoProgressError
        Where no such step is left.
    """
    observations, best, rules = context.observations, context.best, context.settings.rules
    forces = observations.forces[best] * context.free  # (n, 3)
    if context.subspace is not None:
        forces = context.subspace.project(forces)
    direction = forces / max(np.linalg.norm(forces, axis=1).max(), 1e-12)
    newton = np.inf
    if rules.newton_force_step:
        newton = newton_length(context.gp, context.centre, forces)
    if newton < context.settings.trust_region.floor:
        model_step = newton_step(context.gp, context.centre, context.free, forces)
        steps = [newton * direction] if model_step is None else [model_step, newton * direction]
        for step in steps:
            if observations.find(context.centre + step) is None:
                return context.centre + step
        raise NoProgressError(
            f"the model's Newton step ({newton:.2g} Å along the forces) was computed "
            "already and came out no lower"
        )
    halvings = 40 if rules.force_step_halving else 1
    for step in length * 0.5 ** np.arange(halvings):
        positions = observations.positions[best] + step * direction
        if context.is_new(positions):
            return positions
    raise NoProgressError("every step along the forces leads to a configuration already computed")


def newton_step(gp, positions, free, forces):
    """The step (n, 3) from ``positions`` (n, 3) to the minimum of the model's quadratic
    there, ``H^-1 f``, in the ``free`` (n, 3) coordinates less the rigid motions
    (:func:`asebo.optimize.model_hessian.internal_basis`), with ``H`` the model's
    Hessian (:func:`asebo.optimize.model_hessian.posterior_hessian`) and ``f`` the
    ``forces`` (n, 3) observed; None where ``H`` is not positive definite there or the
    prior calculator fails (J. Nocedal and S. J. Wright, "Numerical Optimization",
    Springer (2006), sec. 3.3)."""
    try:
        hessian = posterior_hessian(gp, positions, free)  # (3n, 3n)
    except PriorCalculationError:
        return None
    basis = internal_basis(positions, free, bool(np.all(free)))  # (3n, k)
    curvatures, modes = np.linalg.eigh(basis.T @ hessian @ basis)  # (k,), (k, k)
    if not len(curvatures) or curvatures.min() <= 0.0:
        return None
    along = modes.T @ (basis.T @ np.asarray(forces, dtype=np.float64).ravel())  # (k,)
    return (basis @ (modes @ (along / curvatures))).reshape(positions.shape)


def newton_length(gp, positions, forces):
    """The largest atomic move (Å) of the step along ``forces`` (n, 3) from ``positions``
    (n, 3) to the minimum of the model's quadratic along them: ``|f|_max / k``, with
    ``k`` the model's curvature along the unit forces
    (:func:`asebo.optimize.model_hessian.directional_curvature`); infinite where the
    model does not curve up along them, the forces vanish or the prior calculator
    fails."""
    norm = np.linalg.norm(forces)
    if norm == 0.0:
        return np.inf
    try:
        curvature = directional_curvature(gp, positions, (forces / norm).ravel())
    except PriorCalculationError:
        return np.inf
    if curvature <= 0.0:
        return np.inf
    return float(np.linalg.norm(forces, axis=1).max() / curvature)


def only_rigid_forces_left(positions, forces, fmax, free, invariant):
    """Whether ``forces`` (n, 3) at ``positions`` (n, 3) meet ``fmax`` once their net force
    and torque are taken off, but not with them.

    A rotation-invariant model (``invariant``) predicts no net force or torque, so no
    proposal of its own removes them. Only with every coordinate ``free`` (n, 3), where
    rigid motions are symmetries, and with an ``fmax`` (None outside ``run``).
    """
    if fmax is None or not free.all() or not invariant:
        return False
    shape_forces = forces - rigid_part(positions, forces)  # (n, 3)
    largest = np.linalg.norm(forces, axis=1).max()
    return np.linalg.norm(shape_forces, axis=1).max() < fmax <= largest
