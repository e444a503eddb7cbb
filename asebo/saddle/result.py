"""What a saddle search found where it ended: :class:`SaddleResult`.

A search converges where the largest computed force is below ``fmax`` and the model
puts the configuration at a first-order saddle point (one negative curvature:
:class:`asebo.saddle.order.OrderVerdict`). Converged forces where the model has no
negative curvature are a minimum, where its one negative curvature is softer than
:data:`asebo.saddle.order.FLAT_CURVATURE` a flat region, where it has two or more
and no step off is left a saddle point of higher order: the search ends there, not
converged. Otherwise it ended
on its steps, or where the walk on the model ended on a configuration already computed
and the Newton step off it (:func:`asebo.saddle.walk.newton_step`) on one too.
"""

from dataclasses import dataclass

FIRST_ORDER = "first-order saddle"
MINIMUM = "minimum"
FLAT = "flat"
HIGHER_ORDER = "higher order"
STEPS = "steps"
WALK_FAILED = "walk failed"
WALK_ON_COMPUTED = "walk on a configuration computed"
ORDER_UNKNOWN = "order unknown"


@dataclass(frozen=True)
class SaddleResult:
    """A saddle search's endpoint, as the model judges it.

    Attributes
    ----------
    converged : bool
        The forces are converged and the model has one negative curvature there: what
        ``run`` returns.
    forces_converged : bool
        The largest computed force (constraints applied) is below ``fmax``.
    order : int or None
        The model's negative curvatures where the forces are converged; None elsewhere
        (not judged).
    imaginary : float or None
        cm⁻¹, the model's imaginary frequency where ``order`` is 1.
    reason : str
        Why the search ended: :data:`FIRST_ORDER`, :data:`MINIMUM`, :data:`FLAT`,
        :data:`HIGHER_ORDER`, :data:`STEPS`, :data:`WALK_FAILED` or
        :data:`WALK_ON_COMPUTED`.
    overlap : float or None
        Where ``order`` is 1, the absolute overlap of the model's imaginary mode with
        the mode the search climbed from its start, the start turned onto the end
        (:func:`asebo.saddle.mode_probe.mode_overlap`): near 1 where the saddle point
        is the one of the motion the search set out along, near 0 where it is the
        saddle point of another; None elsewhere.
    """

    converged: bool
    forces_converged: bool
    order: int | None
    imaginary: float | None
    reason: str
    overlap: float | None = None


def judged_end(verdict, overlap=None):
    """The :class:`SaddleResult` where the forces are converged and the search ends on
    the :class:`asebo.saddle.order.OrderVerdict` ``verdict`` (its step None), with the
    ``overlap`` of its imaginary mode with the mode climbed from the start."""
    order = verdict.order
    reason = FIRST_ORDER if order == 1 else MINIMUM if order == 0 else HIGHER_ORDER
    if verdict.flat is not None:
        reason = FLAT
    if verdict.unknown is not None:
        return SaddleResult(False, True, None, None, ORDER_UNKNOWN, overlap)
    return SaddleResult(order == 1, True, order, verdict.imaginary, reason, overlap)


def unjudged_end(forces_converged, order, stopped):
    """The :class:`SaddleResult` of a search that ended before its verdict: on its steps
    (a step off a saddle point of higher order still to take where ``forces_converged``,
    with the model's ``order``), or where ``stopped`` says (:data:`WALK_FAILED`,
    :data:`WALK_ON_COMPUTED`; None: the steps)."""
    return SaddleResult(False, forces_converged, order, None, stopped or STEPS)
