"""BOOptimizer: Bayesian optimization of a geometry, an ASE optimizer.

Each step fits :class:`asebo.model.gp.EnergyForceGP` to every energy and force computed
so far, minimises the lower confidence bound ``mu - kappa sigma`` (Wong and Kolter,
eq. 35) inside a trust box around the lowest-energy configuration
(:func:`asebo.optimize.search.search`), offers the proposal to the named stages of the
special cases (:mod:`asebo.optimize.stages`), and moves the atoms there; ASE's loop
then calls the calculator. The trust box grows when the GP predicted the new energy
well and shrinks when it did not (:class:`asebo.optimize.trust.TrustRegion`), and
shrinks before the call where the GP doubts its own proposal
(:func:`asebo.optimize.trust.check_confident`). Each proposal says why it was made
(its ``reason``, :data:`asebo.optimize.proposal.REASONS`), in the log and in the
restart file (:attr:`BOOptimizer.reasons`).

Every configuration is computed at most once: the observations
(:class:`asebo.optimize.observations.Observations`) answer for a configuration already seen.
Each evaluation is written to the restart file as soon as the calculator returns,
and each proposal before it is computed, so a run killed at any moment and started
again with the same restart file goes on with the same observations, repeats no
calculator call but the one a kill between its return and its save cut off, and
writes every evaluation to the trajectory exactly once. The restart file is locked
against other processes while an optimizer may write it
(:class:`asebo.optimize.restart_lock.RestartLock`).

Periodic cells (slabs, bulk) and ASE's cell filters (positions and cell together)
take the periodic representation and the pair-spring prior by default
(:class:`asebo.optimize.representations.PeriodicPositions`,
:class:`asebo.model.periodic.RecentredSprings`); the optimizer then works on the
filter's generalized positions and forces
(:class:`asebo.model.cell_coordinates.GeneralizedCoordinates`).
"""

import os
from typing import ClassVar

from ase.optimize.optimize import DEFAULT_MAX_STEPS, Optimizer
from ase.parallel import broadcast, world

from asebo.optimize.build import build_engine, engine_coordinates
from asebo.optimize.consistency import MismatchNote
from asebo.optimize.model_results import ModelResults
from asebo.optimize.observations import (
    TrajectoryFrames,
    calculator_identity,
    check_restart,
    choices_of_run,
    system_of,
)
from asebo.optimize.observed_atoms import ComputedResults, ObservedAtoms
from asebo.optimize.proposal import PROBE
from asebo.optimize.resolve import positive_number as _number
from asebo.optimize.restart_lock import RestartLock
from asebo.optimize.run_state import resume_run, start_run
from asebo.optimize.run_summary import MinimumSummary
from asebo.optimize.run_views import RunViews
from asebo.optimize.settings import TrustSettings
from asebo.optimize.stages import NoProgressError
from asebo.optimize.step_log import LoggedSteps
from asebo.optimize.subspace import held_coordinates
from asebo.optimize.system_checks import (
    check_constraints_unchanged,
    check_distinct_files,
    check_system,
    check_writable,
    held_forces,
    periodic_note,
    resume_system,
)
from asebo.optimize.trust import TrustRegion
from asebo.optimize.warm_start import WarmStart
from asebo.threads import optimizer_threads, with_optimizer_threads


class BOOptimizer(MinimumSummary, ModelResults, RunViews, LoggedSteps, WarmStart, Optimizer):
    """Bayesian optimization with a GP on energies and forces (Wong and Kolter).

    A thin ASE driver around :class:`asebo.optimize.engine.Engine`: the run's state, the
    restart file, the trajectory, the log, the constraints, each step broadcast from
    rank 0. Choices and defaults: ``docs/using.md`` ("Options", "Kernels", "Priors").

    Parameters
    ----------
    atoms : ase.Atoms or cell filter
        With a calculator; ``FixAtoms``, ``FixCartesian``, ``FixedPlane``,
        ``FixedLine`` and ``FixSymmetry`` honoured
        (:data:`asebo.optimize.system_checks.SUPPORTED_CONSTRAINTS`). A cell filter
        (Fréchet, unit-cell, exp-cell) moves the atoms and the cell together.
    restart : str, optional
        JSON file of every observation: read if it exists, written at every call,
        locked against other processes (:class:`asebo.optimize.restart_lock.RestartLock`).
        A resumed run proposes what the uninterrupted run proposed.
    logfile : file, str or None
        ``'-'`` for standard output: ASE's step lines with the model's predicted energy
        and each step's reason (:data:`asebo.optimize.proposal.REASONS`), notes ``# ``.
    trajectory : str, optional
        ASE trajectory of every configuration computed, each written once. Two of the
        files named (restart, logfile, trajectory, observations) that are one file are
        refused before any call
        (:func:`asebo.optimize.system_checks.check_distinct_files`).
    append_trajectory : bool, optional
        Keep the frames in ``trajectory``; default: where a restart file is read.
    prior : ase calculator, 'lindh', 'springs', 'max', 'mean', 'auto', float or Prior
        The GP's prior mean (:mod:`asebo.model.priors`, :mod:`asebo.model.periodic`);
        a calculator makes the GP learn the difference to it.
    kernel : {'internal', 'anisotropic', 'svd', 'cartesian', 'inverse', 'periodic'}, optional
        How the GP sees a configuration, by name or as a Representation
        (:mod:`asebo.optimize.representations`).
    kappa, maxstep, trust_radius, recentre, gp_options : optional
        Shortcuts into the settings below (:data:`asebo.optimize.resolve.SHORTCUTS`): the
        weight of the uncertainty in ``mu - kappa sigma``, the longest atomic move (Å),
        the first half-width of the trust box (Å), the Lindh or springs prior's
        recentring (eV), the options of :class:`asebo.model.gp.EnergyForceGP`. A value
        given both ways must be the same.
    search, trust_region, model, special_cases, rules : optional
        :class:`asebo.optimize.settings.SearchSettings`, ``TrustSettings``,
        ``ModelSettings``, ``SpecialCases``, and ``Rules``, which turns each
        special-case rule off alone (``asebo bench ablation``).
    observations : str, Path, Atoms or iterable, optional
        A warm start: frames with energies and forces computed before, taken as
        observations at no call (:meth:`replay_trajectory`).
    comm : communicator
        Ranks that take the same step: rank 0 computes it and broadcasts it.
    threads : int, optional
        Threads of the optimizer's own work, given back to the calculator after it
        (:func:`asebo.threads.optimizer_threads`).

    Attributes
    ----------
    engine : asebo.optimize.engine.Engine
    settings : asebo.optimize.settings.Settings
        Resolved once (:func:`asebo.optimize.resolve.resolve_settings`): what the GP, the
        search, the trust region and the stages use. ``representation``, ``prior`` and
        the other views of the engine: :class:`asebo.optimize.run_views.RunViews`.

    References
    ----------
    E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning
    from geometric data", Carnegie Mellon University (preprint), section "Bayesian
    optimization", eqs. 34-35.
    """

    defaults: ClassVar[dict] = {
        **Optimizer.defaults,
        "maxstep": TrustSettings.default_maxstep,
        "trust_radius": TrustSettings.default_radius,
    }

    def __init__(
        self,
        atoms,
        restart=None,
        logfile="-",
        trajectory=None,
        prior=None,
        kappa=None,
        maxstep=None,
        trust_radius=None,
        kernel=None,
        gp_options=None,
        recentre=None,
        append_trajectory=None,
        comm=world,
        search=None,
        trust_region=None,
        model=None,
        special_cases=None,
        observations=None,
        threads=None,
        rules=None,
        **kwargs,
    ):
        self.threads = optimizer_threads(threads)
        check_distinct_files(
            restart=restart, logfile=logfile, trajectory=trajectory, observations=observations
        )
        self.coordinates = _checked_coordinates(atoms, restart, trajectory)
        self._held = held_forces(atoms)  # what the constraints hold: checked at each run
        coordinates = engine_coordinates(self.coordinates)
        self.numbers, self.subspace = coordinates["numbers"], coordinates["allowed"]
        self.periodic = coordinates["periodic"]
        shortcuts = dict(kappa=kappa, maxstep=maxstep, trust_radius=trust_radius, recentre=recentre)
        settings = dict(search=search, trust_region=trust_region, model=model)
        settings.update(special_cases=special_cases, rules=rules, gp_options=gp_options)
        self.engine, choices = build_engine(
            atoms, coordinates, prior, kernel, shortcuts, self.threads, **settings
        )
        self._computed = ComputedResults()  # the calculator's energy and forces
        self._mismatch = MismatchNote()  # energy_force_mismatch, said once a run
        self._given = {"kernel": kernel is not None, "prior": prior is not None}
        super().__init__(
            atoms, restart=restart, logfile=logfile, trajectory=None, comm=comm, **kwargs
        )
        self.optimizable = ObservedAtoms(
            atoms, self.coordinates.atoms, self._observe, self.subspace
        )
        self._open_outputs(trajectory, append_trajectory, observations)
        self._write_notes(choices)

    def _open_outputs(self, trajectory, append_trajectory, observations):
        """Lock the restart file, open the trajectory (writing the observations not in
        it), take a warm start's frames, write the log's header and a periodic note."""
        lock = self.closelater(RestartLock.acquire(self.restart, self.comm))
        with lock.released_on_error():
            self.frames = TrajectoryFrames.of_run(  # each observation written once
                trajectory,
                append_trajectory,
                self.coordinates.atoms,
                self.observations,
                comm=self.comm,
                description=self.todict(),
                coordinates=self.coordinates,
            )
            if self.frames is not None and self.frames.note is not None:
                self._write_notes([self.frames.note])
            if observations is not None:
                self._replay_trajectory(observations)
        self.step_log.header()
        if self.periodic:
            self._write_notes([periodic_note(self.coordinates, self.representation, self.prior)])

    def irun(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """ASE's :meth:`ase.optimize.optimize.Optimizer.irun`, with ``fmax`` refused
        before any call unless it is a finite number > 0 or 0 (ASE's way of taking
        ``steps`` steps, as its own tests do), and a line in the log at the end where
        the bonding changed (:attr:`bonds_changed`)."""
        stepping = not isinstance(fmax, bool) and isinstance(fmax, (int, float)) and fmax == 0
        fmax = 0.0 if stepping else _number("fmax", fmax, None)
        check_constraints_unchanged(self._held, self.atoms, type(self).__name__)
        return self._noting_end(super().irun(fmax, steps))

    def run(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """ASE's :meth:`ase.optimize.optimize.Optimizer.run`, with ``fmax`` refused
        before any call unless it is a finite number > 0, and a line in the log at
        the end where the bonding changed (:attr:`bonds_changed`)."""
        fmax = _number("fmax", fmax, None)
        check_constraints_unchanged(self._held, self.atoms, type(self).__name__)
        converged = super().run(fmax, steps)
        self._note_end()
        return converged

    def _noting_end(self, steps):
        """The generator ``steps`` of :meth:`irun`, then :meth:`_note_end`."""
        yield from steps
        self._note_end()

    def _note_end(self):
        """The notes of an accepted :attr:`endpoint_verdict`, and a line where
        :attr:`bonds_changed` says the bonding changed."""
        verdict = self.endpoint_verdict
        if verdict is not None and verdict.converged:
            self._write_notes(verdict.notes)
        changes = self.bonds_changed
        if changes:
            self._write_notes([f"{changes.describe()} (first configuration to the lowest)"])

    # ---- state ----------------------------------------------------------------------
    def initialize(self):
        entries = {
            "calculator": calculator_identity(self.coordinates.atoms.calc),
            "cell_filter": self.coordinates.record(),
            **choices_of_run(self.representation, self.prior),
            "start": self.atoms.get_positions(),
        }
        trust = TrustRegion(self.initial_trust_radius, self.maxstep, self.settings.trust_region)
        self._take_state(
            start_run(self.numbers, self.restart, self.comm, entries, trust, self._system())
        )

    def read(self):
        run = {
            "calculator": calculator_identity(self.coordinates.atoms.calc),
            "system": self._system(),
            "start": self.atoms.get_positions(),
            "held": held_coordinates(self.coordinates, self.atoms.get_positions()),
            "choices": choices_of_run(self.representation, self.prior),
            "given": self._given,
        }
        trust_region = (self.maxstep, self.settings.trust_region)
        state = resume_run(self.numbers, self.restart, self.comm, run, trust_region)
        self._write_notes(state.notes)
        self._take_state(state)
        self.atoms.set_positions(state.positions)

    def _system(self):
        """The boundary conditions and cell the calls are made in; a cell filter's cell,
        which the run moves, is not held."""
        return system_of(self.coordinates.atoms, cell=not self.coordinates.has_cell)

    def _take_state(self, state):
        """Take the observations, trust region, prediction and proposals of ``state``
        (:class:`asebo.optimize.run_state.RunState`)."""
        self.observations, self.trust = state.observations, state.trust
        self.predicted_energy = state.predicted_energy  # of the configuration computed next
        self.proposals = state.proposals  # Proposal.record() of every proposal

    def gradient_converged(self, gradient):
        """ASE's test of the forces and an endpoint the checks at convergence accept
        (:attr:`endpoint_verdict`); a symmetry probe's forces end nothing. Writes
        nothing: the verdict's notes reach the log with its step or at the run's end."""
        if self.reasons[-1:] == [PROBE]:
            return False
        if not super().gradient_converged(gradient):
            return False
        verdict = self.endpoint_verdict
        return verdict is None or verdict.converged

    @property
    @with_optimizer_threads
    def endpoint_verdict(self):
        """The :class:`asebo.optimize.endpoint.Verdict` of the checks at convergence on
        the latest configuration computed where its forces meet ASE's test for the run's
        ``fmax``; None where they do not, before any call, and where no check applies
        (:meth:`asebo.optimize.engine.Engine.endpoint_verdict`, decided once per
        configuration)."""
        fmax = getattr(self, "fmax", None)  # set by run()
        if fmax is None or not len(getattr(self, "observations", ())):
            return None
        if not self.optimizable.converged(self.optimizable.get_gradient(), fmax):
            return None
        radius = max(self.trust.radius, self.initial_trust_radius)
        return self.engine.endpoint_verdict(
            self.observations, self.atoms.get_positions(), self.reasons, radius
        )

    # ---- observations ---------------------------------------------------------------
    def _observe(self):
        """Energy and forces (N, 3) at the system's positions; computed if not seen before."""
        positions = self.atoms.get_positions()
        index = self.observations.find(positions)
        if index is None:
            index = self._computed.append_to(
                self.observations,
                self.atoms,
                self.coordinates,
                positions,
                self.nsteps,
                self.restart,
            )
            self.observations.save(
                trust_radius=self.trust.radius, predicted_energy=self.predicted_energy, pending=None
            )
        if self.frames is not None:
            self.frames.sync(self.observations)
        return self.observations.energies[index], self.observations.forces[index]

    # ---- the step -------------------------------------------------------------------
    @with_optimizer_threads
    def step(self):
        """Judge the last proposal, propose the next configuration, move the atoms there."""
        energies = self.observations.energies
        if self.predicted_energy is not None and len(energies) > 1:
            self.trust = self.trust.after(min(energies[:-1]), self.predicted_energy, energies[-1])
        self._write_notes(self._mismatch.notes(self.observations))
        proposal = self._propose() if self.comm.rank == 0 else None
        proposal = broadcast(proposal, root=0, comm=self.comm)
        if isinstance(proposal, NoProgressError):
            self._stop_without_progress(proposal)
            return
        self._write_notes(proposal.notes)
        self.atoms.set_positions(proposal.positions)
        self.predicted_energy, self.trust = proposal.predicted_energy, proposal.trust
        self.proposals.append(proposal.record())
        # a filter's positions come back from its cell through expm and logm, a few
        # ulps off: the proposal itself is set again on resuming
        pending = proposal.positions if self.coordinates.has_cell else self.atoms.get_positions()
        self.observations.save(
            trust_radius=self.trust.radius,
            predicted_energy=self.predicted_energy,
            pending=pending,
            proposals=self.proposals,
        )

    def _stop_without_progress(self, error):
        """End the run unconverged at the lowest configuration, with ``error``'s line."""
        best = self.observations.best()
        self._write_notes([error.note(self.observations.forces[best] * self.engine.free)])
        self.atoms.set_positions(self.observations.positions[best])
        self.predicted_energy = None
        self.max_steps = self.nsteps + 1  # ASE's loop ends after this step

    def _propose(self):
        """The engine's next configuration to compute
        (:meth:`asebo.optimize.engine.Engine.propose`), or the
        :class:`asebo.optimize.stages.NoProgressError` of a stage that finds none left.
        Writes nothing: the notes travel with the proposal."""
        fmax = getattr(self, "fmax", None)  # set by run()
        try:
            return self.engine.propose(self.observations, self.trust, fmax, self.endpoint_verdict)
        except NoProgressError as error:
            return error


def _checked_coordinates(system, restart, trajectory):
    """The coordinates of ``system`` (a cell filter's given the restart file's
    undeformed cell), the restart file and the trajectory's folder checked before any
    call (:mod:`asebo.optimize.system_checks`)."""
    stored = check_restart(None if restart is None else os.fspath(restart))
    coordinates = check_system(system)
    if stored is not None:
        coordinates = resume_system(system, stored, restart)
    check_writable("restart", restart)
    check_writable("trajectory", trajectory)
    return coordinates
