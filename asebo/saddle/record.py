"""The record of a saddle search: every configuration computed, the next one and the
trust radius, in the restart file that :class:`asebo.optimize.observations.Observations`
writes after each call and checks on every read, as :class:`asebo.BOOptimizer`'s."""

import os

import numpy as np
from ase.io.jsonio import decode

from asebo.optimize.observations import (
    Observations,
    RestartError,
    check_calculator,
    check_held,
    check_start,
    system_of,
)
from asebo.optimize.observed_atoms import not_finite_message
from asebo.optimize.subspace import free_atoms

SADDLE = "saddle search"  # the kind of run its restart file names


class SearchRecord:
    """The record of :class:`asebo.saddle.BOSaddle`: a mixin of a driver with ``atoms``,
    ``restart``, ``comm``, ``identity``, ``_given``, ``_stored``, ``_computed``,
    ``_predicted``, ``trust_radius``, ``nsteps``, ``frames`` and ``_adapt_trust_radius``."""

    def initialize(self):
        """A new record of the configurations computed."""
        self.observations = Observations(
            self.atoms.numbers, self.restart, self.comm, SADDLE, system_of(self.atoms)
        )
        self.observations.state.update(
            calculator=self.identity, start=self.atoms.positions.copy(), given=len(self._given[1])
        )
        for positions, energy, forces in zip(*self._given):
            self.observations.append(positions, energy, forces)

    def read(self):
        """The record of the restart file (read and checked before ASE opened the
        trajectory: :func:`stored_search`); the atoms are moved to the next
        configuration it names."""
        self.observations = self._stored
        state = self.observations.state
        self.trust_radius = float(state["trust_radius"])
        self.atoms.positions = np.asarray(state["next"], dtype=float)
        if "predicted" in state:
            predicted = np.asarray(state["predicted"], dtype=float)
            self._predicted = (self.atoms.positions.copy(), predicted, bool(state["stopped"]))
        self.observations.state["calculator"] = self.identity

    def _record(self):
        """Add the atoms' computed energy and forces to the record once, judge the last
        walk's prediction there, save the restart file."""
        positions = self.atoms.positions.copy()  # (n, 3)
        if self.observations.find(positions) is not None:
            return
        energy, forces = self._computed.results(self.atoms)  # (), (n, 3)
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            raise FloatingPointError(
                not_finite_message(self.nsteps, self.observations, self.restart)
            )
        self.observations.append(positions, energy, forces)
        self._adapt_trust_radius(positions, forces)
        self.observations.save(trust_radius=self.trust_radius, next=positions)
        if self.frames is not None:
            self.frames.sync(self.observations)

    def _save(self, following):
        """Write the restart file with ``following`` (n, 3) the next to compute and the
        model's forces predicted there."""
        state = {"trust_radius": self.trust_radius, "next": np.array(following)}
        if self._predicted is not None and np.allclose(self._predicted[0], following):
            state.update(predicted=self._predicted[1], stopped=self._predicted[2])
        self.observations.save(**state)


def recorded_start(restart, positions):
    """The start (n, 3) the saddle search of the restart file ``restart`` was built at,
    where the file is one; else ``positions``. A search built again from a band that
    has moved on since (its climbing image went on) resumes where it began."""
    if restart is None or not os.path.isfile(restart):
        return positions
    try:
        with open(restart) as file:
            start = decode(file.read()).get("start")
    except (OSError, ValueError, AttributeError):  # the checks of the search say what
        return positions
    start = None if start is None else np.asarray(start, dtype=float)
    return positions if start is None or start.shape != np.shape(positions) else start


def stored_search(restart, atoms, identity, comm):
    """The record (:class:`asebo.optimize.observations.Observations`) of the saddle
    search in the restart file ``restart``, checked against ``atoms`` and the calculator
    ``identity``; None where there is no such file.

    Raises
    ------
    asebo.optimize.observations.RestartError
        Another kind of run, other atoms, boundary conditions or cell, another
        calculator or another start, configurations computed without the atoms'
        constraints.
    """
    if restart is None or not os.path.isfile(restart):
        return None
    system = system_of(atoms)
    record = Observations.load(atoms.numbers, restart, comm, SADDLE, system)
    state = record.state
    check_calculator(restart, state.get("calculator"), identity)
    check_start(restart, atoms.positions, state.get("start"), record, system)
    check_held(restart, record.positions, atoms.positions, free_atoms(atoms), atoms.cell, atoms.pbc)
    if "next" not in state:
        raise RestartError(f"restart file {restart} is not a saddle search's: pass another name")
    return record
