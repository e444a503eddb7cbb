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
import time
from typing import ClassVar

import numpy as np
from ase.optimize.optimize import DEFAULT_MAX_STEPS, Optimizer
from ase.parallel import broadcast, world

from asebo.optimize.bonding import bond_changes
from asebo.optimize.build import build_engine
from asebo.optimize.consistency import energy_force_mismatch
from asebo.optimize.model_results import ModelResults
from asebo.optimize.observations import (
    Observations,
    TrajectoryFrames,
    calculator_identity,
    calculator_results,
    check_calculator,
    check_restart,
    check_start,
    choices_of_run,
    compare_choices,
)
from asebo.optimize.observed_atoms import ComputedResults, ObservedAtoms, not_finite_message
from asebo.optimize.proposal import PROBE
from asebo.optimize.resolve import positive_number as _number
from asebo.optimize.restart_lock import RestartLock
from asebo.optimize.settings import TrustSettings
from asebo.optimize.stages import NoProgressError
from asebo.optimize.subspace import free_subspace, held_axes
from asebo.optimize.system_checks import (
    check_system,
    check_writable,
    periodic_note,
    resume_system,
)
from asebo.optimize.trust import TrustRegion
from asebo.optimize.warm_start import take_frames
from asebo.threads import optimizer_threads, with_optimizer_threads

NOTE_PREFIX = "# "
"""How a note line of the log begins: a comment to readers of ASE's log format."""


class BOOptimizer(ModelResults, Optimizer):
    """Bayesian optimization with a GP on energies and forces (Wong and Kolter).

    A thin ASE driver around :class:`asebo.optimize.engine.Engine`: it keeps the run's
    observations, trust region and proposals, reads and writes the restart file and the
    trajectory, writes the log, honours the constraints and broadcasts each step from
    rank 0. Each argument's choices and defaults are on the user page
    ``docs/using.md`` ("Options", "Kernels", "Priors").

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
        and the reason of each step (:data:`asebo.optimize.proposal.REASONS`), and notes
        that start with ``# ``.
    trajectory : str, optional
        ASE trajectory of every configuration computed, each written once.
    append_trajectory : bool, optional
        Keep the frames in ``trajectory``; default: where a restart file is read.
    prior : ase calculator, 'lindh', 'springs', 'max', 'mean', 'auto', float or Prior
        The GP's prior mean (:mod:`asebo.model.priors`, :mod:`asebo.model.periodic`);
        a calculator makes the GP learn the difference to it.
    kernel : {'internal', 'anisotropic', 'svd', 'cartesian', 'periodic'} or Representation
        How the GP sees a configuration (:mod:`asebo.optimize.representations`).
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
        search, the trust region and the stages use.
    representation : asebo.optimize.representations.Representation
    prior : asebo.model.priors.Prior

    References
    ----------
    E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning
    from geometric data", Carnegie Mellon University (preprint), section "Bayesian
    optimization", eqs. 34-35.
    """

    _header_written = False  # the log's header line, written once

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
        self.coordinates = _checked_coordinates(atoms, restart, trajectory)
        self.engine, choices = build_engine(
            atoms,
            self._engine_coordinates(),
            prior,
            kernel,
            dict(kappa=kappa, maxstep=maxstep, trust_radius=trust_radius, recentre=recentre),
            search=search,
            trust_region=trust_region,
            model=model,
            special_cases=special_cases,
            rules=rules,
            gp_options=gp_options,
        )
        self._computed = ComputedResults()  # the calculator's energy and forces
        self._mismatch_noted = False  # energy_force_mismatch is written once a run
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
        """Lock the restart file, open the trajectory, take a warm start's frames, then
        write the log's header and the periodic system's note: nothing is written
        before the lock is held."""
        lock = self.closelater(RestartLock.acquire(self.restart, self.comm))
        try:
            self._open_trajectory(trajectory, append_trajectory)
            if observations is not None:
                self._replay_trajectory(observations)
        except BaseException:
            lock.release()
            raise
        self._write_header()
        if self.periodic:
            self._write_notes([periodic_note(self.coordinates, self.representation, self.prior)])

    def _engine_coordinates(self):
        """The coordinates of the system as the engine takes them
        (:class:`asebo.optimize.engine.Engine`); sets ``subspace``, ``periodic`` and
        ``numbers``, a filter's cell rows counted as atoms of number 0."""
        constrained = self.coordinates.atoms  # the atoms behind a filter, or atoms
        free = self._free_coordinates()  # (N, 3)
        self.subspace = free_subspace(self.coordinates, free)
        self.periodic = self.coordinates.has_cell or bool(np.any(constrained.pbc))
        cell_rows = np.zeros(self.coordinates.rows - len(constrained))
        self.numbers = np.concatenate([constrained.get_atomic_numbers(), cell_rows]).astype(int)
        return {
            "numbers": self.numbers,
            "free": free,
            "subspace": self.subspace,
            "periodic": self.periodic,
            "cell": self.coordinates.has_cell,
        }

    def _open_trajectory(self, trajectory, append_trajectory):
        """The trajectory's :class:`asebo.optimize.observations.TrajectoryFrames` (None
        without a ``trajectory``): its frames kept where ``append_trajectory`` says, by
        default where a restart file was read, the observations not yet in it written."""
        self.frames = None
        if trajectory is None:
            return
        resumed = len(self.observations) > 0
        self.frames = TrajectoryFrames(
            trajectory,
            self.coordinates.atoms,
            resumed if append_trajectory is None else bool(append_trajectory),
            self.observations,
            comm=self.comm,
            description=self.todict(),
            coordinates=self.coordinates,
        )
        if self.frames.note is not None:
            self._write_notes([self.frames.note])

    @property
    def gp(self):
        """The engine's :class:`asebo.model.gp.EnergyForceGP`, refitted after each call."""
        return self.engine.gp

    @property
    def prior(self):
        """The engine's prior (:class:`asebo.model.priors.Prior`)."""
        return self.engine.prior

    @property
    def representation(self):
        """The engine's :class:`asebo.optimize.representations.Representation`."""
        return self.engine.representation

    @property
    def settings(self):
        """The engine's resolved :class:`asebo.optimize.settings.Settings`."""
        return self.engine.settings

    @property
    def kappa(self):
        """The weight of the uncertainty in the bound the search minimises,
        ``settings.search.kappa``."""
        return self.settings.search.kappa

    @property
    def maxstep(self):
        """Å: the largest displacement of an atom in one step, ``settings.trust_region.maxstep``."""
        return self.settings.trust_region.maxstep

    @property
    def initial_trust_radius(self):
        """Å: the first half-width of the trust box, ``settings.trust_region.radius``."""
        return self.settings.trust_region.radius

    @property
    def recentre(self):
        """eV: the recentring of the Lindh prior or the pair springs,
        ``settings.model.recentre``."""
        return self.settings.model.recentre

    def irun(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """ASE's :meth:`ase.optimize.optimize.Optimizer.irun`, with ``fmax`` refused
        before any call unless it is a finite number > 0 or 0 (ASE's way of taking
        ``steps`` steps, as its own tests do), and a line in the log at the end where
        the bonding changed (:attr:`bonds_changed`)."""
        stepping = not isinstance(fmax, bool) and isinstance(fmax, (int, float)) and fmax == 0
        fmax = 0.0 if stepping else _number("fmax", fmax, None)
        return self._noting_bonds(super().irun(fmax, steps))

    def run(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """ASE's :meth:`ase.optimize.optimize.Optimizer.run`, with ``fmax`` refused
        before any call unless it is a finite number > 0, and a line in the log at
        the end where the bonding changed (:attr:`bonds_changed`)."""
        converged = super().run(_number("fmax", fmax, None), steps)
        self._note_end()
        return converged

    def _noting_bonds(self, steps):
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

    @property
    def bonds_changed(self):
        """The bonds broken and made from the first configuration computed to the
        lowest (:class:`asebo.optimize.bonding.BondChanges`, false where none); None
        for a periodic system, and before any call."""
        if self.periodic or not len(getattr(self, "observations", ())):
            return None
        positions = self.observations.positions
        return bond_changes(self.numbers, positions[0], positions[self.observations.best()])

    # ---- state ----------------------------------------------------------------------
    def initialize(self):
        self.observations = Observations(self.numbers, self.restart, self.comm)
        self.observations.state["calculator"] = self._calculator_identity()
        self.observations.state["cell_filter"] = self.coordinates.record()
        self.observations.state.update(choices_of_run(self.representation, self.prior))
        self.observations.state["start"] = self.atoms.get_positions()
        self.trust = TrustRegion(
            self.initial_trust_radius, self.maxstep, self.settings.trust_region
        )
        self.predicted_energy = None  # the GP's energy of the configuration to compute next
        self.proposals = []  # Proposal.record() of every proposal

    def read(self):
        self.observations = Observations.load(self.numbers, self.restart, self.comm)
        state = self.observations.state
        identity = self._calculator_identity()
        check_calculator(self.restart, state.get("calculator"), identity)
        check_start(self.restart, self.atoms.get_positions(), state.get("start"), self.observations)
        chosen = choices_of_run(self.representation, self.prior)
        self._write_notes(compare_choices(self.restart, state, chosen, self._given))
        state["calculator"] = identity
        self.trust = TrustRegion(
            float(state["trust_radius"]), self.maxstep, self.settings.trust_region
        )
        self.predicted_energy = state.get("predicted_energy")
        self.proposals = list(state.get("proposals", []))  # absent from older files
        pending = state.get("pending")
        # the configuration to compute next, or the last one computed, which the
        # observations answer for without a call
        self.atoms.set_positions(
            self.observations.positions[-1] if pending is None else np.asarray(pending, dtype=float)
        )

    def _calculator_identity(self):
        """The calculator's name and parameters, recorded in the restart file."""
        return calculator_identity(self.coordinates.atoms.calc)

    def todict(self):
        description = super().todict()
        description.update(
            kappa=self.kappa,
            trust_radius=self.initial_trust_radius,
            kernel=self.representation.name,
            recentre=self.recentre,
            prior=self.prior.label,
            threads=self.threads,
        )
        return description

    @property
    def trust_radius(self):
        """Half-width of the current trust box, Å."""
        return self.trust.radius

    @property
    def energies(self):
        """Energies of every configuration computed, in order, eV."""
        return self.observations.energies

    @property
    def positions_seen(self):
        """Positions of every configuration computed, in order, (N, 3) each, Å (a cell
        filter's generalized positions: N = n + 3)."""
        return self.observations.positions

    @property
    def forces(self):
        """Unconstrained forces of every configuration computed, (N, 3) each, eV/Å (a
        cell filter's generalized forces)."""
        return self.observations.forces

    @property
    def reasons(self):
        """The reason of every proposal, in order (:data:`asebo.optimize.proposal.REASONS`):
        ``reasons[k]`` led to configuration ``k + 1``, as recorded in the restart file."""
        return [proposal["reason"] for proposal in self.proposals]

    def gradient_converged(self, gradient):
        """ASE's test of the forces, and an endpoint the checks at convergence accept
        (:attr:`endpoint_verdict`; :mod:`asebo.optimize.endpoint`). Writes nothing:
        the verdict's notes reach the log with the step it takes, or at the end of the
        run. The forces of a symmetry probe end nothing: the model steps on from there."""
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
        the latest configuration computed, where its forces meet ASE's test for the
        ``fmax`` of the run; None where they do not, before any call, and where no
        check applies (a cell filter, constraints that allow a subspace only, no free
        coordinate beyond the rigid motions). The engine decides it once per
        configuration (:meth:`asebo.optimize.engine.Engine.endpoint_verdict`)."""
        fmax = getattr(self, "fmax", None)  # set by run()
        if fmax is None or not len(getattr(self, "observations", ())):
            return None
        if not self.optimizable.converged(self.optimizable.get_gradient(), fmax):
            return None
        radius = max(self.trust.radius, self.initial_trust_radius)
        return self.engine.endpoint_verdict(
            self.observations, self.atoms.get_positions(), self.reasons, radius
        )

    @property
    def curvature_verdict(self):
        """The model's lowest curvature at an accepted endpoint, as the log's line at
        convergence gives it (:attr:`asebo.optimize.endpoint.Verdict.summary`); None
        before one."""
        verdict = self.endpoint_verdict
        return None if verdict is None else verdict.summary

    # ---- observations ---------------------------------------------------------------
    def _replay_trajectory(self, traj):
        """Take every frame of ``traj`` not seen before as an observation.

        Called by ASE's :meth:`ase.optimize.optimize.Optimizer.replay_trajectory` (which
        opens a file name as a trajectory) and by the ``observations`` argument; ``traj``
        is anything :func:`asebo.optimize.warm_start.read_frames` reads. The frames are
        checked whole before any is taken, written to the restart file, and come first
        in the trajectory. Where a frame is taken, the next step is not judged against
        the last proposal's prediction (the trust radius is kept); where none is (a
        resumed run given its frames again), the pending proposal is judged as in the
        uninterrupted run.
        """
        added, note = take_frames(self.observations, traj, self.coordinates)
        self._write_notes([note])
        if added:  # else a resumed run given its frames again: the pending step stands
            self.predicted_energy = None
            self.observations.save(trust_radius=self.trust.radius, predicted_energy=None)

    def _observe(self):
        """Energy and forces (N, 3) at the system's positions; computed if not seen before."""
        positions = self.atoms.get_positions()
        index = self.observations.find(positions)
        if index is None:
            energy, forces = self._computed.results(self.atoms)
            if not (np.isfinite(energy) and np.isfinite(forces).all()):
                raise FloatingPointError(
                    not_finite_message(self.nsteps, self.observations, self.restart)
                )
            stress = (
                self.coordinates.atoms.get_stress(apply_constraint=False)  # (6,), no call
                if self.coordinates.has_cell
                else None
            )
            results = calculator_results(self.coordinates.atoms)
            index = self.observations.append(positions, energy, forces, stress, results)
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
        if not self._mismatch_noted:
            record = self.observations  # its lists: no (m, N, 3) copy each step
            note = energy_force_mismatch(record.positions, record.energies, record.forces)
            if note is not None:
                self._write_notes([f"{note} (said once)"])
                self._mismatch_noted = True
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
        """End the run unconverged at the lowest configuration computed, with a line in
        the log: ``error`` (:class:`asebo.optimize.stages.NoProgressError`) says no step
        along its forces is left that the calls could tell apart from it."""
        best = self.observations.best()
        forces = self.observations.forces[best] * self.engine.free
        self._write_notes(
            [
                f"the forces at the lowest configuration "
                f"({np.linalg.norm(forces, axis=1).max():.2g} eV/Å) are at the calculator's "
                f"noise level ({error}): the run stops unconverged, the lowest "
                "configuration computed kept in the atoms"
            ]
        )
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

    def _free_coordinates(self):
        """Boolean mask (N, 3) of the coordinates no constraint (nor a filter's mask)
        holds whole: FixAtoms, FixCartesian, FixedPlane and FixedLine along an axis."""
        free = self.coordinates.free()  # FixAtoms, the filter's mask
        for constraint in self.coordinates.atoms.constraints:
            held = held_axes(constraint)
            if held is not None:
                free[constraint.index] &= ~held
        return free

    def _write_notes(self, notes):
        """One line in the log for each note, between the step lines: ``# `` and the
        note, which a reader of ASE's log format skips as a comment, and which no
        parser of step lines (``NAME:`` and a step number) takes for one."""
        if self.logfile is not None and notes:
            self._write_header()  # a note of the restart file's check comes before it
            for note in notes:
                self.logfile.write(f"{NOTE_PREFIX}{note}\n")

    def _write_header(self):
        """ASE's header line, with the columns asebo adds after ASE's; written when the
        optimizer is built, before any note, as the first line of its log."""
        if self.logfile is not None and not self._header_written:
            self._header_written = True
            self.logfile.write(
                f"{' ' * len(type(self).__name__)}  {'Step':>4} {'Time':>8} {'Energy':>15}  "
                f"{'fmax':>12} {'Predicted':>15} Reason\n"
            )

    def log(self, gradient):
        """ASE's step line (``NAME:``, step, time, energy, fmax), then the energy the model
        predicted and the reason of the step; the header came with the optimizer."""
        if self.logfile is None:
            return
        fmax = self.optimizable.gradient_norm(gradient)
        energy = self.optimizable.get_value()
        now = time.localtime()
        name = type(self).__name__
        later = self.nsteps > 0 and len(self.proposals) > 0
        predicted = (
            f"{self.predicted_energy:15.6f}"
            if later and self.predicted_energy is not None
            else " " * 15
        )
        reason = self.proposals[-1]["reason"] if later else ""
        line = (
            f"{name}:  {self.nsteps:3d} {now[3]:02d}:{now[4]:02d}:{now[5]:02d} "
            f"{energy:15.6f} {fmax:15.6f} {predicted} {reason}"
        )
        self.logfile.write(line.rstrip() + "\n")


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
