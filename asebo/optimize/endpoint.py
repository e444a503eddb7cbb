"""The checks at convergence, each a named stage whose verdict is a record.

Where ASE's test of the forces is met on a molecule, :class:`asebo.BOOptimizer` asks
the stages of :data:`ENDPOINT_STAGES` in order whether the run should go on. A stage
returns None where its case does not hold, or a :class:`Verdict` that keeps the run
going, with the step it takes (or none: the model's search then steps). Where none
holds, :func:`endpoint_verdict` accepts the endpoint. Each stage reads an
:class:`EndpointContext` and writes nothing; the optimizer writes the verdict's notes
in its log, and its convergence test is ASE's test and an accepting verdict.

- :func:`descend_negative_curvature` (``'curvature'``): the model's energy curves down
  beyond its doubt along a free mode, and the prior or a configuration computed says
  so too (:func:`asebo.optimize.model_hessian.evidence_of_descent`): the forces vanish
  on a saddle. A step along the lowest such mode to the model's lowest energy on it
  within the trust radius, both signs tried
  (:func:`asebo.optimize.model_hessian.descent_along`), at most
  ``special_cases.curvature_steps`` times a run.
- :func:`continue_quadratic_drop` (``'quadratic_drop'``): the model's quadratic at the
  latest configuration puts its minimum more than ``special_cases.quadratic_drop``
  below the lowest energy computed (a floppy molecule stopped on the shoulder of a
  long, shallow valley); the model's search steps on, until
  :data:`QUADRATIC_PATIENCE` calls in a row find nothing lower.
- :func:`probe_held_symmetry` (``'probe'``): every configuration kept the endpoint's
  point group (:func:`asebo.optimize.symmetry.held_symmetry`), so the model's curvature
  along the modes that break it is its prior's alone; with
  ``special_cases.symmetry_probe`` set, one call displaced along the softest of them.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from asebo.optimize.model_hessian import descent_along
from asebo.optimize.proposal import CURVATURE, PROBE
from asebo.optimize.symmetry import held_symmetry

QUADRATIC_DROP = "quadratic_drop"
"""The stage name of :func:`continue_quadratic_drop`, which takes no step of its own."""
ACCEPTED = "accepted"
"""The stage name of a verdict that accepts the endpoint."""
QUADRATIC_PATIENCE = 3
"""Calls in a row that find nothing lower after which the model's quadratic no longer
keeps a run with converged forces going (``special_cases.quadratic_drop``)."""


@dataclass(frozen=True)
class Verdict:
    """What the checks at convergence decided on one configuration.

    Attributes
    ----------
    stage : str
        The stage that decided: ``'curvature'``, ``'quadratic_drop'``, ``'probe'``, or
        ``'accepted'`` where none kept the run going.
    converged : bool
        Whether the endpoint is accepted.
    notes : tuple of str
        Lines for the log.
    positions : array (N, 3) or None
        The configuration the stage steps to; None where the model's search steps (or
        the endpoint is accepted).
    value : float or None
        What the stage measured: the negative curvature followed (eV/Å²), the model's
        drop below the lowest energy (eV), or the probed mode's curvature (eV/Å²).
    summary : str or None
        At an accepted endpoint, the model's lowest curvature and what supports it
        (:meth:`asebo.optimize.model_hessian.ModelCurvature.summary`).
    """

    stage: str
    converged: bool
    notes: tuple = ()
    positions: np.ndarray | None = None
    value: float | None = None
    summary: str | None = None


@dataclass(frozen=True)
class EndpointContext:
    """What the checks at convergence read.

    Attributes
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The GP fitted to every observation, the one the optimizer steps with.
    curvature : asebo.optimize.model_hessian.ModelCurvature
        Its curvature at ``positions``, with the evidence along each downward mode.
    positions : array (N, 3)
        The configuration whose forces met ASE's test, the latest computed.
    observations : asebo.optimize.observations.Observations
    reasons : tuple of str
        The reason of every proposal of the run, in order.
    settings : asebo.optimize.settings.Settings
    periodic : bool
    labels : array (N,) of int
        Atomic numbers with the held coordinates kept apart, for the symmetry check.
    basis : array (3N, k)
        The free coordinates less the rigid motions at ``positions``.
    radius : float
        Å: how far a curvature step may go.
    """

    gp: object
    curvature: object
    positions: np.ndarray
    observations: object
    reasons: tuple
    settings: object
    periodic: bool
    labels: np.ndarray
    basis: np.ndarray
    radius: float

    @cached_property
    def descents(self):
        """:func:`supported_descents`, found once for every stage that reads it."""
        return supported_descents(self)

    @cached_property
    def symmetry(self):
        """:func:`endpoint_symmetry`, found once for every stage that reads it."""
        return endpoint_symmetry(self)


def supported_descents(context):
    """Indices into ``context.curvature`` of the negative curvatures beyond their doubt
    that the evidence supports (all of them where ``rules.curvature_evidence`` is
    off), lowest first: the modes a curvature step may follow."""
    curvature = context.curvature
    return list(
        curvature.evidenced if context.settings.rules.curvature_evidence else curvature.negative
    )


def descend_negative_curvature(context):
    """A step along the lowest supported negative curvature (``'curvature'``), at most
    ``special_cases.curvature_steps`` times a run; None otherwise."""
    evidenced = context.descents
    taken = context.reasons.count(CURVATURE)
    if not evidenced or taken >= context.settings.special_cases.curvature_steps:
        return None
    index = evidenced[0]  # the lowest: the curvatures ascend
    curvature = context.curvature
    lowest, doubt = curvature.curvatures[index], curvature.uncertainties[index]
    positions = descent_along(context.gp, context.positions, curvature.modes[index], context.radius)
    if positions is None:  # the prior calculator fails all along the mode
        return None
    note = (
        f"the forces are converged, but the model's energy curves down "
        f"({lowest:.3g} ± {doubt:.2g} eV/Å²) along a free mode: a step along it"
    )
    return Verdict(CURVATURE, False, (note,), positions, float(lowest))


def quadratic_drop_left(context):
    """How far below the lowest energy computed the minimum of the model's quadratic
    at the latest configuration of a molecule lies, where that exceeds
    ``special_cases.quadratic_drop``; else None.

    None for a periodic system, and once :data:`QUADRATIC_PATIENCE` calls in a row
    have found nothing lower: a run whose calls no longer descend stops.
    """
    threshold, rules = context.settings.special_cases.quadratic_drop, context.settings.rules
    observations = context.observations
    energies = observations.energies
    best, latest = observations.best(), len(energies) - 1
    patience = QUADRATIC_PATIENCE if rules.quadratic_patience else np.inf
    if threshold is None or context.periodic or latest - best >= patience:
        return None
    drop = context.curvature.quadratic_drop(-np.asarray(observations.forces[latest]))
    below = energies[best] - (energies[latest] - drop)
    return below if below > threshold else None


def continue_quadratic_drop(context):
    """The run goes on, the model's search stepping (``'quadratic_drop'``), where
    :func:`quadratic_drop_left` finds the model's minimum below the lowest energy."""
    drop = quadratic_drop_left(context)
    if drop is None:
        return None
    note = (
        f"the forces are converged, but the model's quadratic puts its minimum "
        f"{drop:.3g} eV below the lowest energy computed: the run goes on"
    )
    return Verdict(QUADRATIC_DROP, False, (note,), None, float(drop))


def endpoint_symmetry(context):
    """:func:`asebo.optimize.symmetry.held_symmetry` of a molecule's run, ending at
    ``context.positions``; None for a periodic system."""
    if context.periodic:
        return None
    configurations = [*context.observations.positions, context.positions]
    return held_symmetry(configurations, context.labels, context.curvature.projected, context.basis)


def probed_along(positions, mode, length):
    """``positions`` (N, 3) displaced along the unit ``mode`` (3N,), the largest atomic
    move ``length`` Å."""
    direction = np.asarray(mode).reshape(positions.shape)
    return positions + length * direction / np.linalg.norm(direction, axis=1).max()


def probe_held_symmetry(context):
    """One call displaced along the softest mode that breaks a symmetry every
    configuration kept (``'probe'``, once a run), where
    ``special_cases.symmetry_probe`` is set; None otherwise."""
    length = context.settings.special_cases.symmetry_probe
    if length is None or PROBE in context.reasons:
        return None
    symmetry = context.symmetry
    if symmetry is None:
        return None
    note = (
        f"the forces are converged on a symmetry of order {symmetry.order} that "
        f"every configuration kept; the model's curvature along the "
        f"{symmetry.breaking} modes that break it is the prior's alone: a probe "
        f"{length:g} Å along the softest ({symmetry.curvature:.3g} eV/Å²)"
    )
    positions = probed_along(context.positions, symmetry.mode, length)
    return Verdict(PROBE, False, (note,), positions, float(symmetry.curvature))


def accept_endpoint(context):
    """The verdict that accepts the endpoint, with the model's lowest curvature there
    and, where every configuration kept a symmetry, a line that says so."""
    summary = context.curvature.summary()
    notes = [f"at convergence, {summary}"]
    symmetry = context.symmetry
    if symmetry is not None:
        notes.insert(
            0,
            f"the endpoint and every configuration computed keep a symmetry of order "
            f"{symmetry.order}: the model's curvature along the {symmetry.breaking} "
            "modes that break it is the prior's alone",
        )
    return Verdict(ACCEPTED, True, tuple(notes), summary=summary)


ENDPOINT_STAGES = (descend_negative_curvature, continue_quadratic_drop, probe_held_symmetry)
"""The checks at convergence, in the order they are asked."""


def endpoint_verdict(context):
    """The first verdict of :data:`ENDPOINT_STAGES` that keeps the run going, else the
    one of :func:`accept_endpoint`."""
    for stage in ENDPOINT_STAGES:
        verdict = stage(context)
        if verdict is not None:
            return verdict
    return accept_endpoint(context)
