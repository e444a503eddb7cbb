"""What a run of :class:`asebo.BOOptimizer` keeps between its steps and in its restart
file: the observations, the trust region, the energy the model predicted for the
configuration computed next, and the record of every proposal."""

from dataclasses import dataclass, field

import numpy as np

from asebo.optimize.observations import (
    Observations,
    check_calculator,
    check_held,
    check_start,
    compare_choices,
)
from asebo.optimize.trust import TrustRegion


@dataclass
class RunState:
    """A run's state.

    Attributes
    ----------
    observations : asebo.optimize.observations.Observations
    trust : asebo.optimize.trust.TrustRegion
    predicted_energy : float or None
        eV: the model's energy of the configuration to compute next.
    proposals : list of dict
        :meth:`asebo.optimize.proposal.Proposal.record` of every proposal.
    positions : array (N, 3) or None
        Where a resumed run sets the atoms: the configuration to compute next, or the
        last one computed, which the observations answer for without a call.
    notes : list of str
        For the log: how the resumed run's kernel and prior compare with the file's.
    """

    observations: Observations
    trust: TrustRegion
    predicted_energy: float | None = None
    proposals: list = field(default_factory=list)
    positions: np.ndarray | None = None
    notes: list = field(default_factory=list)


def start_run(numbers, restart, comm, entries, trust, system=None):
    """The state of a new run: no observation, ``entries`` (dict) in the record's
    ``state`` (what the restart file checks on resuming), the first ``trust``, the
    observations computed in ``system``
    (:func:`asebo.optimize.observations.system_of`)."""
    observations = Observations(numbers, restart, comm, run="minimisation", system=system)
    observations.state.update(entries)
    return RunState(observations, trust)


def resume_run(numbers, restart, comm, run, trust_region):
    """The state of a run read from the restart file ``restart``, checked against this
    run before it is taken.

    Parameters
    ----------
    numbers : array (N,)
    restart : str
    comm : communicator
    run : dict
        This run's ``calculator`` (:func:`asebo.optimize.observations.calculator_identity`),
        ``system`` (:func:`asebo.optimize.observations.system_of`), ``start`` positions
        (N, 3), ``held`` (where the constraints hold the atoms,
        :func:`asebo.optimize.subspace.held_coordinates`), ``choices``
        (:func:`asebo.optimize.observations.choices_of_run`) and ``given`` (whether the
        kernel and prior were arguments).
    trust_region : tuple
        ``(maxstep, TrustSettings)`` of the trust region.

    Raises
    ------
    asebo.optimize.observations.RestartError
        Another calculator, system or start than the file's, configurations computed
        without this run's constraints, or a kernel or prior given that is not the
        file's.
    """
    observations = Observations.load(
        numbers, restart, comm, run="minimisation", system=run["system"]
    )
    state = observations.state
    check_calculator(restart, state.get("calculator"), run["calculator"])
    check_start(restart, run["start"], state.get("start"), observations, run["system"])
    check_held(restart, observations.positions, **run["held"])
    notes = compare_choices(restart, state, run["choices"], run["given"])
    state["calculator"] = run["calculator"]
    pending = state.get("pending")
    return RunState(
        observations,
        TrustRegion(float(state["trust_radius"]), *trust_region),
        predicted_energy=state.get("predicted_energy"),
        proposals=list(state.get("proposals", [])),  # absent from older files
        positions=(
            observations.positions[-1] if pending is None else np.asarray(pending, dtype=float)
        ),
        notes=notes,
    )
