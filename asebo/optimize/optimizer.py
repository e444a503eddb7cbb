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

import copy
import inspect
import os
import time
from dataclasses import replace
from typing import ClassVar

import numpy as np
from ase import Atoms
from ase.calculators.calculator import PropertyNotImplementedError
from ase.constraints import FixAtoms, FixCartesian, FixedLine, FixedPlane, FixSymmetry
from ase.filters import FrechetCellFilter, UnitCellFilter
from ase.neighborlist import neighbor_list
from ase.optimize.optimize import DEFAULT_MAX_STEPS, OptimizableAtoms, Optimizer
from ase.parallel import broadcast, world

from asebo.model.cell_coordinates import GeneralizedCoordinates, resume_filter
from asebo.model.gp import EnergyForceGP
from asebo.model.priors import AnchoredOffset
from asebo.model.springs import CLOSEST_APPROACH
from asebo.optimize.bonding import bond_changes
from asebo.optimize.consistency import energy_force_mismatch
from asebo.optimize.flat_centres import flat_centres
from asebo.optimize.model_hessian import (
    descent_along,
    evidence_of_descent,
    internal_basis,
    model_curvature,
    prior_where_interpolated,
    without_rigid_motions,
)
from asebo.optimize.observations import (
    Observations,
    RestartError,
    TrajectoryFrames,
    calculator_identity,
    calculator_results,
    check_calculator,
    check_choice,
    check_restart,
    check_start,
)
from asebo.optimize.proposal import CURVATURE, PROBE, Proposal, StepContext
from asebo.optimize.representations import make_representation
from asebo.optimize.restart_lock import RestartLock
from asebo.optimize.search import search
from asebo.optimize.settings import (
    ModelSettings,
    Rules,
    SearchSettings,
    Settings,
    SpecialCases,
    TrustSettings,
)
from asebo.optimize.stages import (
    STAGES,
    NoProgressError,
    only_rigid_forces_left,
    search_starts,
)
from asebo.optimize.subspace import free_subspace, held_axes
from asebo.optimize.surrogate_model import fit_observations, system_prior
from asebo.optimize.symmetry import held_symmetry
from asebo.optimize.trust import TrustRegion
from asebo.optimize.warm_start import observed_frames, read_frames
from asebo.threads import optimizer_threads, with_optimizer_threads

NOTE_PREFIX = "# "
"""How a note line of the log begins: a comment to readers of ASE's log format."""
SUPPORTED_CONSTRAINTS = (FixAtoms, FixCartesian, FixedPlane, FixedLine, FixSymmetry)
FILTER_CONSTRAINTS = (FixAtoms, FixSymmetry)  # those a cell filter's coordinates can honour
QUADRATIC_PATIENCE = 3
"""Calls in a row that find nothing lower after which the model's quadratic no longer
keeps a run with converged forces going (``special_cases.quadratic_drop``)."""


class _ObservedAtoms(OptimizableAtoms):
    """ASE's view of the atoms (or of a cell filter) that computes each configuration once.

    ``observe()`` returns the energy and the unconstrained forces (N, 3) at the
    system's positions, calling the calculator only for a configuration not seen
    before; the constraints of ``atoms``, the atoms behind the system, act on their
    first ``len(atoms)`` rows, and the gradient is projected onto ``subspace``
    (:class:`asebo.optimize.subspace.FreeSubspace`, the cell rows included) where given.
    """

    def __init__(self, system, atoms, observe, subspace=None):
        super().__init__(system)
        self.constrained = atoms
        self.observe = observe
        self.subspace = subspace

    def get_gradient(self):
        forces = self.observe()[1].copy()  # (N, 3)
        for constraint in self.constrained.constraints:
            constraint.adjust_forces(self.constrained, forces[: len(self.constrained)])
        if self.subspace is not None:
            forces = self.subspace.project(forces)
        return -forces.ravel()

    def get_value(self):
        return self.observe()[0]


class BOOptimizer(Optimizer):
    """Bayesian optimization with a GP on energies and forces (Wong and Kolter).

    Parameters
    ----------
    atoms : ase.Atoms or cell filter
        The molecule, slab or bulk, with a calculator attached; ``FixAtoms``,
        ``FixCartesian``, ``FixedPlane``, ``FixedLine`` and ``FixSymmetry`` constraints
        are honoured (the search moves in the subspace they allow,
        :mod:`asebo.optimize.subspace`), others refused. Or a cell filter
        (:class:`ase.filters.FrechetCellFilter`, :class:`ase.filters.UnitCellFilter`,
        :class:`ase.filters.ExpCellFilter`) of such atoms, with ``FixAtoms`` or
        ``FixSymmetry``, its ``mask`` and ``hydrostatic_strain`` (the cell keeps its
        shape) honoured, and ``constant_volume`` with the Fréchet filter (whose
        traceless moves keep the volume): the optimizer then moves the filter's
        generalized positions (the atoms and the cell's deformation) along its forces
        (the virial included). The energy is the
        force-consistent one (``free_energy``) where the calculator gives it.
    restart : str, optional
        JSON file holding every observation; read if it exists, written each call.
        A finished run read again reports convergence with no calculator call. The
        file records the run's start, kernel and prior: atoms neither at the start nor
        at a configuration computed, and a ``kernel`` or ``prior`` given that is not
        the run's, are refused. Locked against other processes from the construction
        until the optimizer is closed or collected
        (:class:`asebo.optimize.restart_lock.RestartLock`).
    logfile : file, str or None
        ``'-'`` for standard output. ASE's header, written when the optimizer is built,
        and ASE's step lines, each with the model's predicted energy (the lowest
        energy computed less the model's drop from there) and the reason of the step
        that led there (:data:`asebo.optimize.proposal.REASONS`) after ASE's columns;
        notes on what the optimizer did between two calls are lines of their own that
        start with ``# ``.
    trajectory : str, optional
        ASE trajectory of every evaluated configuration, each written once.
    append_trajectory : bool, optional
        Keep the frames already in ``trajectory``. Default: keep them when a restart
        file is read (its observations already there are not written again), start
        the file afresh otherwise. Started afresh after a restart file is read, the
        trajectory receives every observation of the restart file.
    prior : ase calculator, 'lindh', 'max', 'mean', 'auto', float or Prior, optional
        Prior mean of the GP (:mod:`asebo.model.priors`). A cheap calculator makes the
        GP learn the difference to it (Δ-learning), with a random scale on its
        curvature (``model.prior_curvature``;
        :class:`asebo.kernels.prior_scale.PriorCurvature`). ``'auto'``: GFN2-xTB
        when the target is another calculator and GFN2-xTB describes the system, the
        default otherwise (:func:`asebo.model.priors.automatic_prior`; the choice is
        written to the log).
        A prior calculator that fails where the search of the model takes it (an SCF
        that does not converge) halves the trust radius, up to ``search.retries``
        times, and then turns that step into a step along the forces, with a line in
        the log each time; one that fails at a configuration already computed stops
        the run with :class:`asebo.model.priors.PriorCalculationError`.
        ``'lindh'`` (the default for molecules) is
        :class:`asebo.model.priors.RecentredLindh`, harmonic bonds, bends and torsions
        with Lindh's model force constants around the first configuration computed
        (see ``recentre``), no second calculator. ``'springs'`` (the default for
        periodic cells and cell filters) is :class:`asebo.model.periodic.RecentredSprings`,
        pair springs with the force constants of Packwood et al.'s ``Exp``
        preconditioner, recentred in the same way; for them ``'auto'`` takes EMT where
        it describes every element as a metal and the target is not EMT, CHGNet for
        other elements where it is installed and not the target
        (:func:`asebo.model.periodic.automatic_periodic_prior`). A constant: the highest
        (``'max'``) or mean energy seen, or a number. A
        :class:`asebo.model.priors.Prior` object is taken as it is.
    kappa : float
        Weight of the model's uncertainty in the bound ``mu - kappa sigma`` the search
        minimises: > 0 explores (the lower confidence bound), 0 minimises the mean, < 0
        penalises uncertain steps (``mu + |kappa| sigma``, a pessimistic bound).
        Default ``search.kappa``, else by the number of free coordinates
        (:meth:`asebo.optimize.settings.SearchSettings.kappa_for`): 0.1 below 90
        (30 free atoms) and under a prior calculator, -3 from 90 on.
    recentre : float
        With the ``'lindh'`` and ``'springs'`` priors: when the model puts the lowest-energy
        configuration more than ``recentre`` eV above its minimum, the model is
        rebuilt around that configuration. By default ``model.recentre``, else the
        representation's (2 eV with the ``'internal'`` kernel, whose linear trend
        carries the way from the first configuration over smaller misfits; 0.3 eV
        with the others). With the ``'internal'`` kernel the rebuilt Lindh model is
        the metric's, and the prior takes it only where it fits the observed forces
        better than the model it has.
    maxstep : float
        Largest displacement of any atom in one step, Å. Default
        ``trust_region.maxstep``, else 0.2, and 0.6 under a prior calculator, whose
        surface holds far from the configurations computed; the trust region still
        grows to it one good prediction at a time. A search that ends further away is
        cut back to ``maxstep`` on the straight line; where the model predicts that
        step at or above its own energy at the lowest configuration seen, the search is
        repeated in a box half the size (up to ``search.retries`` times), with a line
        in the log.
    trust_radius : float
        Initial half-width of the trust box, Å per coordinate. Default
        ``trust_region.radius``, else 0.1, and 0.13 under a prior calculator. Where the
        model's predicted drop at its proposal is below ``trust_region.confidence``
        (3) standard deviations of its own uncertainty there, the search is repeated
        in a box half the size before any call (up to ``search.retries`` times), with
        a line in the log (:func:`asebo.optimize.trust.check_confident`).
    kernel : {'internal', 'anisotropic', 'svd', 'cartesian', 'periodic'} or Representation
        How the GP sees a configuration (:mod:`asebo.optimize.representations`).
        ``'internal'`` (the default for molecules that it describes): the Gaussian
        kernel on the delocalized internal coordinates of the Lindh model's stretches,
        bends and torsions, scaled by its Hessian, a length per direction
        (:class:`asebo.model.metric.InternalMetric`; the model and reference are those
        of the ``'lindh'`` prior, or a Lindh model of the first configuration with
        another prior), plus a linear trend in them (``model.trend``, default 30;
        :class:`asebo.kernels.trend.LinearTrend`). Molecules close to a straight line
        (:func:`asebo.model.straightness.is_near_linear`), or whose internal
        coordinates do not describe every vibration at the start, take
        ``'anisotropic'`` by default; so does a run once the internal coordinates
        fold at a configuration it computed, with a log line
        (:class:`asebo.optimize.representations.InternalCoordinates`).
        ``'anisotropic'``: the Gaussian kernel on positions aligned onto the
        reference and scaled along the eigenvectors of the Lindh Hessian there
        (:class:`asebo.model.metric.HessianMetric`); molecules close to a straight
        line take these features, not aligned: their rotation about the axis hangs on
        small displacements across it. ``'svd'``: the rotation-invariant SVD kernel
        with one length scale (Wong and Kolter). ``'periodic'`` (the default for
        periodic cells and cell filters): the Gaussian kernel on each atom's
        displacement to the nearest lattice image and the cell's deformation, scaled
        along the eigenvectors of the pair springs' Hessian at the springs' centre,
        free coordinates only, with a linear trend
        (:class:`asebo.optimize.representations.PeriodicPositions`). ``'cartesian'``:
        the Gaussian kernel on Cartesian (or a filter's generalized) positions, the
        default with ``FixCartesian`` constraints. A
        :class:`asebo.optimize.representations.Representation` object is checked and
        taken as it is.
    gp_options : dict, optional
        Passed to :class:`asebo.model.gp.EnergyForceGP` (``gamma``, ``fit_gamma``,
        ``energy_noise``, ``gradient_noise``, ``trend``...). ``proper`` and ``radial``
        go to the GP's kernel object of the representation, unless
        ``gp_options['kernel']`` gives the kernel object itself.
    search, trust_region, model, special_cases, rules : optional
        Settings (:mod:`asebo.optimize.settings`): :class:`SearchSettings`,
        :class:`TrustSettings`, :class:`ModelSettings`, :class:`SpecialCases`,
        :class:`Rules` (each special-case rule on, or off alone). The
        arguments above, where given, take precedence over their fields.
    observations : str, Path, Atoms or iterable, optional
        A warm start: energies and forces computed before, taken as observations at
        no cost (:meth:`replay_trajectory`): the trajectory of any optimizer, an
        ``ase.db`` file or ``db.select(...)`` rows, Atoms with single-point results.
        Frames of other atoms, of another calculator (by the name the frames keep),
        without energy and forces (without a stress under a cell filter) or in another
        periodic cell are refused before any call. A frame at the atoms' positions
        makes the first call unnecessary.
    comm : communicator
        Ranks that take the same step: rank 0 computes it and broadcasts it.
    threads : int, optional
        Threads of the optimizer's own work (the fit, the search, the checks at
        convergence, :meth:`fit_model`, :meth:`model_curvature`, :meth:`hessian`,
        :meth:`vibrations`): PyTorch's and every BLAS and OpenMP library's, set for
        that work alone (:func:`asebo.threads.limited_threads`) and given back after
        it, so that the calculator keeps its own. Default: ``OMP_NUM_THREADS`` where
        the user set it, the threads each process is given, else one
        (:func:`asebo.threads.optimizer_threads`): the libraries' own default, a
        thread per core, oversubscribes the cores of a node packed with MPI ranks or
        shared with other work.

    Attributes
    ----------
    representation : asebo.optimize.representations.Representation
    prior : asebo.model.priors.Prior
    settings : asebo.optimize.settings.Settings
        Resolved for the prior and representation.
    curvature_verdict : str or None
        The run's verdict on the model's curvature, of the check at convergence
        (:meth:`gradient_converged`; the log's line ``at convergence, ...``); None
        before that check.

    Notes
    -----
    The special cases are the stages of :mod:`asebo.optimize.stages`. A flat
    pyramidal centre (nitrogen, phosphorus, arsenic, antimony) outside rings in the
    first configuration, which no force there pushes out of plane, sits on a mirror
    plane that no force breaks: under the Lindh or a constant prior the first step
    tilts it ``special_cases.flat_centre_tilt`` (0.1 Å) out of the plane; under a
    prior calculator the first search also starts from the tilted configuration
    where the prior puts it lower. Where the forces of the lowest-energy
    configuration meet ``fmax`` without their net force and torque but not with
    them (a grid's egg-box effect) and the model is rotation-invariant, the model's
    proposal is also moved as a whole along them. Only with every coordinate free.

    A run resumed from its restart file, however often, proposes exactly what the
    uninterrupted run proposed: the observations, the trust region, the prior and
    the pending proposal are restored bit for bit, and the model is fitted to the
    same numbers. The paths agree to the last bit when the calculator does; an SCF
    code started from another density differs in its forces (a fresh GFN2-xTB
    calculator by 2e-5 to 2e-4 eV/Å on small molecules, with tblite's default
    convergence), and a resumed path can then differ by a call.

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
        stored = check_restart(None if restart is None else os.fspath(restart))
        self.coordinates = _check_system(atoms)
        if stored is not None:
            self.coordinates = _resume_filter(atoms, stored, restart)
        constrained = self.coordinates.atoms  # the atoms behind a filter, or atoms
        self.subspace = free_subspace(self.coordinates, self._free_coordinates())
        self.periodic = self.coordinates.has_cell or bool(np.any(constrained.pbc))
        search, trust_region = search or SearchSettings(), trust_region or TrustSettings()
        model = model or ModelSettings()
        self.representation = make_representation(kernel, atoms)
        self.recentre = _recentre(recentre, model, self.representation)
        self.prior, self.prior_reason = system_prior(
            prior, atoms, self.periodic, self.recentre, model, self.representation
        )
        calculator = self.prior.is_calculator
        free_coordinates = (
            int(self._free_coordinates().sum())
            if self.subspace is None
            else self.subspace.dimension
        )
        self.kappa = _finite("kappa", kappa, search.kappa_for(free_coordinates, calculator))
        chosen = kappa is None and search.kappa is None
        self.kappa_reason = (
            f"kappa={self.kappa:g}: {free_coordinates} free coordinates"
            f" ({search.pessimistic_from} or more: a pessimistic bound)"
            if chosen and self.kappa < 0
            else None
        )
        trend = self.representation.default_trend if model.trend is None else model.trend
        self.gp_options = {
            "trend": trend,
            "prior_curvature": model.prior_curvature if calculator else 0.0,
            **_gp_kernel_options(self.representation, gp_options),
        }
        longest = trust_region.calculator_maxstep if calculator else trust_region.default_maxstep
        first = trust_region.calculator_radius if calculator else trust_region.default_radius
        longest = longest if trust_region.maxstep is None else trust_region.maxstep
        first = first if trust_region.radius is None else trust_region.radius
        self.maxstep = _number("maxstep", maxstep, longest)
        self.initial_trust_radius = _number("trust_radius", trust_radius, first)
        self.settings = Settings(
            replace(search, kappa=self.kappa),
            replace(trust_region, maxstep=self.maxstep, radius=self.initial_trust_radius),
            replace(model, trend=trend, recentre=self.recentre),
            special_cases or SpecialCases(),
            rules or Rules(),
        )
        _check_writable("restart", restart)
        _check_writable("trajectory", trajectory)
        # a filter's cell rows count as atoms of number 0 in the restart file
        self.numbers = np.concatenate(
            [constrained.get_atomic_numbers(), np.zeros(self.coordinates.rows - len(constrained))]
        ).astype(int)
        self.gp = _checked_gp(self.gp_options)  # bad options fail here, before any call
        self._metric = None  # (centre, metric) of the representation, from the last fit
        self._last_fit = None  # (observations counted, gp, notes) of the last fit
        self._force_consistent = None  # whether the calculator gives free_energy
        self._mismatch_noted = False  # energy_force_mismatch is written once a run
        self._curvature_checked = None  # observations counted when the curvature was checked
        self.curvature_verdict = None
        self._descent = None  # (positions (N, 3), reason) of the next such step or probe
        self._given = {"kernel": kernel is not None, "prior": prior is not None}
        self._header_written = False
        super().__init__(
            atoms, restart=restart, logfile=logfile, trajectory=None, comm=comm, **kwargs
        )
        self.optimizable = _ObservedAtoms(atoms, constrained, self._observe, self.subspace)
        # before anything is written: the log, the trajectory, the warm start's observations
        lock = self.closelater(RestartLock.acquire(self.restart, comm))
        try:
            resumed = len(self.observations) > 0
            keep = resumed if append_trajectory is None else bool(append_trajectory)
            self.frames = (
                None
                if trajectory is None
                else TrajectoryFrames(
                    trajectory,
                    constrained,
                    keep,
                    self.observations,
                    comm=comm,
                    description=self.todict(),
                    coordinates=self.coordinates,
                )
            )
            if self.frames is not None and self.frames.note is not None:
                self._write_notes([self.frames.note])
            if observations is not None:
                self._replay_trajectory(observations)
        except BaseException:
            lock.release()
            raise
        self._write_header()
        if self.periodic:
            self._write_notes([_periodic_note(self.coordinates, self.representation, self.prior)])
        if self.prior_reason is not None:
            self._write_notes([f"prior='auto': {self.prior_reason}"])
        if self.kappa_reason is not None:
            self._write_notes([self.kappa_reason])

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
        self._note_bonds()
        return converged

    def _noting_bonds(self, steps):
        """The generator ``steps`` of :meth:`irun`, then :meth:`_note_bonds`."""
        yield from steps
        self._note_bonds()

    def _note_bonds(self):
        """A line in the log where :attr:`bonds_changed` says the bonding changed."""
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
        self.observations.state.update(self._choices())
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
        self._check_choices(state)
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

    def _choices(self):
        """The kernel and prior of the run, as the restart file records them: the
        representation's name, the prior's label and, for a prior calculator, its
        name and parameters (:func:`asebo.optimize.observations.calculator_identity`)."""
        calculator = getattr(self.prior, "calculator", None)
        return {
            "kernel": self.representation.name,
            "prior": self.prior.label,
            "prior_calculator": None if calculator is None else calculator_identity(calculator),
        }

    def _check_choices(self, state):
        """Refuse a resume whose ``kernel`` or ``prior``, given, is not the restart
        file's; where one was not given and the default differs, say so in the log."""
        chosen = self._choices()
        stored = {name: state.get(name, chosen[name]) for name in chosen}
        for what, names in (("kernel", ["kernel"]), ("prior", ["prior", "prior_calculator"])):
            if all(stored[name] == chosen[name] for name in names):
                continue
            was, now = (_choice_text(stored, names), _choice_text(chosen, names))
            if self._given[what]:
                check_choice(self.restart, what, was, now)
            self._write_notes(
                [f"the restart file's run took {what} {was}; this one takes {now}, the default"]
            )
        state.update(chosen)

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

    @property
    def lindh_model(self):
        """The :class:`asebo.model.lindh.LindhModel` of the ``'lindh'`` prior, as last
        recentred: the metric's, and the prior's unless it kept an earlier one
        (:class:`asebo.model.priors.RecentredLindh`; None before a fit, and under another
        prior)."""
        return self.prior.metric_reference()[1]

    # ---- the model's Hessian --------------------------------------------------------
    @with_optimizer_threads
    def model_curvature(self, positions=None):
        """The model's Hessian at a configuration computed, with its curvatures and
        their uncertainty; no calculator call.

        Parameters
        ----------
        positions : array (N, 3), optional
            Default: the lowest-energy configuration computed.

        Returns
        -------
        asebo.optimize.model_hessian.ModelCurvature
            ``hessian`` (3N, 3N) in eV/Å², the prior's part included (rows and
            columns of held coordinates zero); ``curvatures`` and ``modes`` in the free
            coordinates less the rigid motions; ``uncertainties``, each curvature's
            posterior standard deviation; ``evidence``, along each negative one
            (beyond its doubt or not),
            whether a configuration computed or a prior calculator says the energy
            falls (:func:`asebo.optimize.model_hessian.evidence_of_descent`). Of the
            GP whose constant is the residual at ``positions``
            (:class:`asebo.model.priors.AnchoredOffset`) and whose Lindh prior has no
            bend stiffer than Lindh's ``k_phi``
            (:meth:`asebo.model.priors.Prior.for_hessian`), refitted to the same
            observations: the checks at convergence read the GP that steps.

        Raises
        ------
        RuntimeError
            Before any configuration is computed.
        ValueError
            Under a cell filter, whose coordinates mix positions and strain.

        Notes
        -----
        Under a calculator prior it costs about 9N calls of the prior calculator.
        """
        return self._result_curvature(positions)

    def _result_curvature(self, positions=None, every_uncertainty=True):
        """:meth:`model_curvature`; ``every_uncertainty`` False probes the uncertainty
        of the lowest and non-positive curvatures only, for callers that read the
        Hessian alone."""
        if self.coordinates.has_cell:
            raise ValueError(
                "the model's Hessian under a cell filter mixes positions and strain: relax "
                "the cell, then run BOOptimizer on the atoms at that cell for their Hessian"
            )
        if not len(self.observations):
            raise RuntimeError("no configuration computed yet: call run() first")
        if positions is None:
            positions = self.observations.positions[self.observations.best()]
        return self._curvature_at(positions, every_uncertainty, anchored=True)[1]

    def _curvature_at(self, positions, every_uncertainty=True, anchored=False):
        """The GP fitted to every observation and its curvature at ``positions``
        (:func:`asebo.optimize.model_hessian.model_curvature`). ``anchored``: under a
        prior that curves, the GP's constant is the residual of the observation at
        ``positions`` (the lowest-energy one where none is there;
        :class:`asebo.model.priors.AnchoredOffset`) and the prior is the one of the
        Hessian given as a result (:meth:`asebo.model.priors.Prior.for_hessian`), its
        length scale kept."""
        gp, _ = self._fitted_model()
        if anchored and not gp.prior.constant:
            found = self.observations.find(positions)
            refit = copy.copy(gp)  # the optimizer's own GP is left as it is
            refit.prior = AnchoredOffset(
                gp.prior.for_hessian(), self.observations.best() if found is None else found
            )
            refit.fit_gamma, refit.gamma = False, gp.gamma_
            gp = refit.fit(*self.observations.arrays())
        free, rotations = self._free_and_rotations()
        curvature = model_curvature(gp, positions, free, rotations, every_uncertainty)
        computed = self.observations.arrays()
        calculator = gp.prior if self.prior.is_calculator else None
        evidence = np.zeros(len(curvature.curvatures), dtype=bool)
        for index in curvature.downward:
            mode = curvature.modes[index]
            evidence[index] = evidence_of_descent(calculator, computed, positions, mode)
        return gp, replace(curvature, evidence=evidence)

    def _free_and_rotations(self):
        """The free coordinates (N, 3), and whether rotations are rigid motions too (a
        molecule with no coordinate held)."""
        free = self._free_coordinates()
        return free, not self.periodic and bool(free.all())

    def _vibrates(self, positions):
        """Whether ``positions`` (N, 3) have a free coordinate beyond the rigid motions
        (not one atom alone, nor atoms all held)."""
        return internal_basis(positions, *self._free_and_rotations()).shape[1] > 0

    @with_optimizer_threads
    def hessian(self, curvature=None):
        """The model's Hessian (3N, 3N), eV/Å², at the lowest-energy configuration
        computed (:meth:`model_curvature`); no calculator call.

        Along a mode where the model curves down (beyond its doubt or not) but no
        configuration computed (nor a prior calculator) says the energy falls, the GP's
        interpolation alone, the curvature is the prior's where that is positive
        (:func:`asebo.optimize.model_hessian.prior_where_interpolated`).

        Parameters
        ----------
        curvature : asebo.optimize.model_hessian.ModelCurvature, optional
            :meth:`model_curvature` at the lowest configuration, where already at hand.
        """
        if curvature is None:
            curvature = self._result_curvature(every_uncertainty=False)
        return self._result_hessian(curvature)

    def _result_hessian(self, curvature):
        """The Hessian (3N, 3N) :meth:`hessian` gives, from the :meth:`model_curvature`
        ``curvature`` at the lowest configuration."""
        positions = self.observations.positions[self.observations.best()]
        prior = self.gp.prior.for_hessian()
        return prior_where_interpolated(curvature, prior, positions).hessian

    @with_optimizer_threads
    def vibrations(self, curvature=None):
        """Harmonic vibrations of :meth:`hessian` at the lowest-energy configuration.

        The atoms with a free coordinate vibrate; for a molecule with no atom held the
        rigid motions are projected out (exactly zero frequencies). The uncertainty of
        each curvature is in :meth:`model_curvature`; the docs say where the model's
        frequencies can be trusted.

        Parameters
        ----------
        curvature : asebo.optimize.model_hessian.ModelCurvature, optional
            :meth:`model_curvature` at the lowest configuration, where already at hand.

        Returns
        -------
        ase.vibrations.VibrationsData
            Frequencies, zero-point energy, modes, as from ``ase.vibrations``.
        """
        from ase.vibrations import VibrationsData  # it brings Matplotlib: only when asked

        if curvature is None:
            curvature = self._result_curvature(every_uncertainty=False)
        atoms = self.coordinates.atoms.copy()
        atoms.positions = self.observations.positions[self.observations.best()]
        free, rotations = self._free_and_rotations()
        indices = np.flatnonzero(free.any(axis=1))
        hessian = self._result_hessian(curvature)
        if rotations:
            hessian = without_rigid_motions(hessian, atoms.positions, atoms.get_masses())
        rows = (3 * indices[:, None] + np.arange(3)).ravel()  # (3f,)
        return VibrationsData.from_2d(atoms, hessian[np.ix_(rows, rows)], indices=indices)

    @with_optimizer_threads
    def gradient_converged(self, gradient):
        """ASE's test of the forces, then the model's curvature where they are met.

        Where the model's energy curves down beyond its doubt along a free mode
        (:attr:`asebo.optimize.model_hessian.ModelCurvature.negative`), the prior or a
        configuration computed says so too
        (:func:`asebo.optimize.model_hessian.evidence_of_descent`), the forces vanish
        on a saddle: the run goes on along the lowest such mode, to the model's lowest
        energy on it within the trust radius, both signs tried
        (:func:`asebo.optimize.model_hessian.descent_along`; reason ``'curvature'``),
        and the calls decide, at most ``special_cases.curvature_steps`` times. Once such
        a step has come out no lower than the configurations before it, a prior
        calculator's own curvature no longer leads a step (a configuration computed
        still does): on S22 under a GFN1-xTB prior, which curves down along rotations
        of one molecule against the other where GFN2-xTB does not, each of the 12
        such steps goes up. Otherwise a
        line in the log gives the lowest curvature, and calls a negative one that
        nothing but the GP's interpolation supports the interpolation's. Where
        ``special_cases.quadratic_drop`` is set, a molecule's run also goes on while
        the model's quadratic at the latest configuration puts its minimum more than
        that below the lowest energy computed
        (:meth:`asebo.optimize.model_hessian.ModelCurvature.quadratic_drop`), until
        :data:`QUADRATIC_PATIENCE` calls in a row find nothing lower. Where every
        configuration of a molecule's run kept the endpoint's point group
        (:func:`asebo.optimize.symmetry.held_symmetry`), a line says so, and with
        ``special_cases.symmetry_probe`` set the run goes on with one call displaced
        along the softest mode that breaks it (reason ``'probe'``, once a run), whose
        own forces end nothing: the model steps on from there. Skipped under a cell
        filter; under a calculator prior the Hessian costs about 8N calls of the prior.
        """
        converged = super().gradient_converged(gradient)
        seen = len(getattr(self, "observations", ()))
        if getattr(self, "proposals", None) and self.proposals[-1]["reason"] == PROBE:
            return False  # the probe's own forces end nothing: the model steps from here
        if not (converged and seen) or self._curvature_checked == seen:
            return converged
        self._curvature_checked = seen
        here = self.atoms.get_positions()
        if self.coordinates.has_cell or self.subspace is not None or not self._vibrates(here):
            return converged
        gp, curvature = self._curvature_at(here, every_uncertainty=False)
        radius = max(self.trust.radius, self.initial_trust_radius)
        rules = self.settings.rules
        evidenced = curvature.evidenced if rules.curvature_evidence else curvature.negative
        refuted = self._refuted_curvature_step() if rules.refuted_curvature else None
        verdict = ""
        if refuted is not None and self.prior.is_calculator and len(evidenced):
            evidenced = self._evidenced_by_the_calls(curvature, here)
            verdict = (
                f"; a step along the prior calculator's negative curvature went up "
                f"(configuration {refuted}), so its curvature alone leads no further step"
            )
        taken = self.reasons.count(CURVATURE)  # the restart file keeps the reasons
        if len(evidenced) and taken < self.settings.special_cases.curvature_steps:
            index = evidenced[0]  # the lowest: the curvatures ascend
            self._descent = (descent_along(gp, here, curvature.modes[index], radius), CURVATURE)
            lowest, doubt = curvature.curvatures[index], curvature.uncertainties[index]
            self._write_notes(
                [
                    f"the forces are converged, but the model's energy curves down "
                    f"({lowest:.3g} ± {doubt:.2g} eV/Å²) along a free mode: a step along it"
                ]
            )
            return False
        drop = self._quadratic_drop_left(curvature)
        if drop is not None:
            self._write_notes(
                [
                    f"the forces are converged, but the model's quadratic puts its minimum "
                    f"{drop:.3g} eV below the lowest energy computed: the run goes on"
                ]
            )
            return False
        symmetry = self._held_symmetry(curvature.hessian, here)
        probe = self.settings.special_cases.symmetry_probe
        if symmetry is not None and probe is not None and PROBE not in self.reasons:
            self._descent = (self._probe_along(here, symmetry.mode, probe), PROBE)
            self._write_notes(
                [
                    f"the forces are converged on a symmetry of order {symmetry.order} that "
                    f"every configuration kept; the model's curvature along the "
                    f"{symmetry.breaking} modes that break it is the prior's alone: a probe "
                    f"{probe:g} Å along the softest ({symmetry.curvature:.3g} eV/Å²)"
                ]
            )
            return False
        if symmetry is not None:
            self._write_notes(
                [
                    f"the endpoint and every configuration computed keep a symmetry of order "
                    f"{symmetry.order}: the model's curvature along the {symmetry.breaking} "
                    "modes that break it is the prior's alone"
                ]
            )
        self.curvature_verdict = f"{curvature.summary()}{verdict}"
        self._write_notes([f"at convergence, {self.curvature_verdict}"])
        return converged

    def _refuted_curvature_step(self):
        """The index of the first configuration a curvature step led to that came out
        no lower than every configuration before it; None where there is none.

        ``reasons[k]`` led to the ``k``-th configuration after those computed before
        any proposal (the start, and observations given or read back).
        """
        energies = self.observations.energies
        first = len(energies) - len(self.proposals)  # configurations before any proposal
        for k, reason in enumerate(self.reasons):
            index = first + k
            if reason == CURVATURE and 0 < index < len(energies):
                if energies[index] >= min(energies[:index]):
                    return index
        return None

    def _evidenced_by_the_calls(self, curvature, positions):
        """The indices of ``curvature.evidenced`` along which a configuration computed,
        not the prior calculator, says the energy falls
        (:func:`asebo.optimize.model_hessian.evidence_of_descent` without the prior)."""
        computed = self.observations.arrays()
        return [
            index
            for index in curvature.evidenced
            if evidence_of_descent(None, computed, positions, curvature.modes[index])
        ]

    def _held_symmetry(self, hessian, positions):
        """:func:`asebo.optimize.symmetry.held_symmetry` of a molecule's run, ending at
        ``positions`` (N, 3) with the model's ``hessian`` (3N, 3N) there; None for a
        periodic system."""
        if self.periodic:
            return None
        free, rotations = self._free_and_rotations()
        labels = 8 * self.numbers + free @ np.array([1, 2, 4])  # held coordinates kept apart
        configurations = [*self.observations.positions, positions]
        basis = internal_basis(positions, free, rotations)
        return held_symmetry(configurations, labels, hessian, basis)

    @staticmethod
    def _probe_along(positions, mode, length):
        """``positions`` (N, 3) displaced along the unit ``mode`` (3N,), the largest
        atomic move ``length`` Å."""
        direction = np.asarray(mode).reshape(positions.shape)
        return positions + length * direction / np.linalg.norm(direction, axis=1).max()

    def _quadratic_drop_left(self, curvature):
        """How far below the lowest energy computed the minimum of the model's quadratic
        at the latest configuration of a molecule lies, where that exceeds
        ``special_cases.quadratic_drop``; else None. None for a periodic system too,
        and once :data:`QUADRATIC_PATIENCE` calls in a row have found nothing lower: a
        run whose calls no longer descend stops. Along a mode where only the GP's
        interpolation curves down, the quadratic takes the prior's curvature, as the
        search does (:func:`asebo.optimize.trust.check_curvature_supported`) and
        :meth:`hessian` does (:func:`asebo.optimize.model_hessian.prior_where_interpolated`):
        left out, such a mode hid a shallow valley's way down."""
        threshold, rules = self.settings.special_cases.quadratic_drop, self.settings.rules
        energies = self.observations.energies
        best, latest = self.observations.best(), len(energies) - 1
        patience = QUADRATIC_PATIENCE if rules.quadratic_patience else np.inf
        # molecules only: measured there, and on EMT's bulk defects it cost calls
        if threshold is None or self.periodic or latest - best >= patience:
            return None
        if rules.quadratic_prior_curvature:
            curvature = prior_where_interpolated(
                curvature, self.gp.prior, self.observations.positions[latest]
            )
        drop = curvature.quadratic_drop(-np.asarray(self.observations.forces[latest]))
        below = energies[best] - (energies[latest] - drop)
        return below if below > threshold else None

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
        frames = read_frames(traj)
        observed = observed_frames(frames, self.coordinates)
        added = 0
        for frame in observed:
            if self.observations.find(frame.positions) is None:
                self.observations.append(frame.positions, frame.energy, frame.forces, frame.stress)
                added += 1
        if not added:  # a resumed run given its frames again: the pending step stands
            self._write_notes([f"warm start: the {len(frames)} frames are observations already"])
            return
        self.predicted_energy = None
        self.observations.save(trust_radius=self.trust.radius, predicted_energy=None)
        known = f", {len(observed) - added} of them known already" if added < len(observed) else ""
        self._write_notes(
            [f"warm start: {added} observations taken from {len(frames)} frames{known}"]
        )

    def _observe(self):
        """Energy and forces (N, 3) at the system's positions; computed if not seen before."""
        positions = self.atoms.get_positions()
        index = self.observations.find(positions)
        if index is None:
            energy = self._energy()
            forces = self.atoms.get_forces(apply_constraint=False)
            if not (np.isfinite(energy) and np.isfinite(forces).all()):
                where = (
                    f"; the {len(self.observations)} earlier observations are kept in "
                    f"{self.restart}"
                    if self.restart
                    else ""
                )
                raise FloatingPointError(
                    f"the calculator returned NaN or inf energy or forces at step "
                    f"{self.nsteps}{where}. Check the calculator (SCF convergence, "
                    "geometry) and run again."
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

    def _energy(self):
        """The force-consistent energy (``free_energy``, whose gradient the forces are;
        with a filter's ``p V`` term) where the calculator gives it, as ASE's
        optimizers take it, else the energy. Decided at the first call, as ASE's
        ``_use_force_consistent_energy`` does, and asked of the system (a cell filter
        too) the same way at every call."""
        if self._force_consistent is None:
            try:
                energy = self.atoms.get_potential_energy(force_consistent=True)
            except PropertyNotImplementedError:
                self._force_consistent = False
            else:
                self._force_consistent = True
                return energy
        return self.atoms.get_potential_energy(force_consistent=self._force_consistent)

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
        forces = self.observations.forces[best] * self._free_coordinates()
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
        """The next configuration to compute (:class:`asebo.optimize.proposal.Proposal`):
        the model's search, then the first stage of :data:`asebo.optimize.stages.STAGES`
        that replaces it; the :class:`asebo.optimize.stages.NoProgressError` of a stage
        that finds no configuration left to compute. Writes nothing: the notes travel
        with the proposal."""
        try:
            return self._proposal()
        except NoProgressError as error:
            return error

    def _proposal(self):
        """:meth:`_propose`'s proposal."""
        context = self._step_context()
        if self._descent is not None:
            (positions, reason), self._descent = self._descent, None
            predicted = context.predicted(positions) if reason == CURVATURE else None
            return Proposal(positions, predicted, context.trust, reason)
        starts, notes = search_starts(context)
        proposal = search(context, starts)
        proposal = replace(proposal, notes=(*context.notes, *notes, *proposal.notes))
        for stage in STAGES:
            adjusted = stage(context, proposal)
            if adjusted is not None:
                return adjusted
        return replace(proposal, predicted_energy=context.predicted(proposal.positions))

    def _step_context(self):
        """The model fitted to every observation, and what the step decides from."""
        gp, notes = self._fitted_model()
        best = self.observations.best()
        free = self._free_coordinates()
        centres, normals = self._flat_start_centres(free)
        rigid_left = self.subspace is None and only_rigid_forces_left(
            self.observations.positions[best],
            self.observations.forces[best],
            getattr(self, "fmax", None),  # set by run()
            free,
            self.representation.invariant(gp.metric),
        )
        return StepContext(
            gp,
            self.observations,
            best,
            free,
            self.trust,
            self.settings,
            self.prior,
            centres,
            normals,
            rigid_left,
            notes,
            self.subspace,
        )

    @with_optimizer_threads
    def fit_model(self):
        """The GP fitted to every observation so far (fitted again only after a new one)."""
        gp, notes = self._fitted_model()
        self._write_notes(notes)
        return gp

    def _fitted_model(self):
        """The GP fitted to every observation, and notes for the log.

        One GP across steps: it keeps the kernel structure of the configurations seen.
        Fitted once per observation: the check at convergence and the step after it
        read the same fit (and its Hessians, :attr:`asebo.model.gp.EnergyForceGP.hessians_`).
        """
        seen = len(self.observations)
        if self._last_fit is not None and self._last_fit[0] == seen:
            return self._last_fit[1:]
        self._metric, notes = fit_observations(
            self.gp,
            self.prior,
            self.representation,
            self.numbers,
            self.observations.arrays(),
            self._metric,
        )
        self._last_fit = (seen, self.gp, notes)
        return self._last_fit[1:]

    def _free_coordinates(self):
        """Boolean mask (N, 3) of the coordinates no constraint (nor a filter's mask)
        holds whole: FixAtoms, FixCartesian, FixedPlane and FixedLine along an axis."""
        free = self.coordinates.free()  # FixAtoms, the filter's mask
        for constraint in self.coordinates.atoms.constraints:
            held = held_axes(constraint)
            if held is not None:
                free[constraint.index] &= ~held
        return free

    def _flat_start_centres(self, free):
        """Centres (c,) and normals (c, 3) of :func:`asebo.optimize.flat_centres.flat_centres`
        in the first configuration, with its forces, while it is the only one computed;
        none otherwise, none in a periodic cell, and none where the constraints allow a
        subspace only."""
        if len(self.observations) != 1 or self.periodic or self.subspace is not None:
            return np.empty(0, dtype=int), np.empty((0, 3))
        return flat_centres(
            self.observations.positions[0], self.numbers, free, self.observations.forces[0]
        )

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


def _choice_text(choices, names):
    """How a log line or message names the kernel or prior of ``choices``."""
    return " ".join(repr(choices[name]) for name in names if choices[name] is not None)


def _recentre(recentre, model, representation):
    """The Lindh prior's recentring, eV: ``recentre``, ``model.recentre`` or the
    representation's default."""
    if recentre is None:
        recentre = representation.default_recentre if model.recentre is None else model.recentre
    if not (isinstance(recentre, (int, float)) and recentre >= 0):
        raise ValueError(f"recentre must be an energy >= 0 in eV (inf: never), got {recentre!r}")
    return recentre


def _gp_kernel_options(representation, gp_options):
    """``gp_options`` with the GP's kernel object of ``representation``.

    ``proper`` and ``radial`` of ``gp_options`` build that object
    (:meth:`asebo.optimize.representations.Representation.gp_kernel`); a ``kernel``
    there replaces it.
    """
    options = dict(gp_options or {})
    if "kernel" not in options:
        given = {name: options.pop(name) for name in ("proper", "radial") if name in options}
        options["kernel"] = representation.gp_kernel(**given)
    return options


def _checked_gp(options):
    """The GP of ``gp_options`` (its prior is set at each fit); unknown names and values
    the GP refuses raise ValueError."""
    accepted = set(inspect.signature(EnergyForceGP).parameters) - {"prior"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        where = " (pass prior= to BOOptimizer)" if "prior" in unknown else ""
        raise ValueError(
            f"gp_options: {', '.join(map(repr, unknown))} not an option of EnergyForceGP"
            f"{where}; its options are {', '.join(sorted(accepted))}"
        )
    return EnergyForceGP(**options)


def _as_float(name, value, default):
    """``value`` (``default`` when None) as a float; a TypeError for what is no number."""
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


def _finite(name, value, default):
    """``value`` (``default`` when None) as a finite float, of either sign."""
    value = _as_float(name, value, default)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def _number(name, value, default):
    """``value`` (``default`` when None) as a finite float > 0."""
    value = _as_float(name, value, default)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def _check_writable(name, path):
    """Refuse a file path that cannot be written, before any calculator call."""
    if path is None or hasattr(path, "write"):
        return
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{name} {path!r} is a folder: pass a file name inside it")
    if not os.path.isdir(folder):
        raise ValueError(f"{name} {path!r}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise PermissionError(
            f"{name} {path!r} cannot be written: choose a file in a folder you can write to"
        )


def _periodic_note(coordinates, representation, prior):
    """The log line that says how a periodic system is modelled."""
    what = (
        f"{type(coordinates.filter_object).__name__} (positions and cell)"
        if coordinates.has_cell
        else "periodic cell"
    )
    return f"{what}: kernel '{representation.name}', prior {prior.label}"


def _resume_filter(system, stored, restart):
    """The coordinates of ``system``, a cell filter given the undeformed cell of the run
    that the restart file's content ``stored`` holds
    (:func:`asebo.model.cell_coordinates.resume_filter`)."""
    try:
        resume_filter(system, stored.get("cell_filter"))
    except ValueError as error:
        raise RestartError(
            f"restart file {restart} cannot be resumed: {error}; or pass another restart "
            "file name to start afresh (this one was left untouched)"
        ) from error
    return GeneralizedCoordinates.from_optimizable(system)


def _check_system(system):
    """The :class:`asebo.model.cell_coordinates.GeneralizedCoordinates` of ``system``;
    a one-line error for what the optimizer cannot relax, before any call."""
    if isinstance(system, UnitCellFilter):  # FrechetCellFilter, ExpCellFilter too
        atoms = system.atoms
        if system.constant_volume and not isinstance(system, FrechetCellFilter):
            raise ValueError(
                f"BOOptimizer keeps the volume of constant_volume exactly only through "
                f"FrechetCellFilter (traceless moves of its logarithm), not "
                f"{type(system).__name__}: use FrechetCellFilter(atoms, constant_volume=True)"
            )
    elif isinstance(system, Atoms):
        atoms = system
    else:
        raise TypeError(
            f"BOOptimizer relaxes an ase.Atoms or a cell filter (FrechetCellFilter, "
            f"UnitCellFilter, ExpCellFilter), got {type(system).__name__}: use one of "
            "these, or an ASE optimizer such as BFGS"
        )
    filtered = atoms is not system
    if atoms.calc is None:
        raise ValueError(
            "BOOptimizer needs a calculator: attach one first, "
            "e.g. atoms.calc = calculators.get_calculator('gfn2')"
        )
    if len(atoms) == 0:
        raise ValueError("no atoms: there is nothing to optimize; give one atom or more")
    supported = FILTER_CONSTRAINTS if filtered else SUPPORTED_CONSTRAINTS
    for constraint in atoms.constraints:
        if not isinstance(constraint, supported):
            if filtered:
                raise TypeError(
                    f"BOOptimizer cannot honour the constraint {type(constraint).__name__} "
                    "with a cell filter, whose coordinates move with the cell: use FixAtoms "
                    "or FixSymmetry, or an ASE optimizer (BFGS) with the filter"
                )
            raise TypeError(
                f"BOOptimizer cannot honour the constraint {type(constraint).__name__}: it "
                "searches the model over linear subspaces of the Cartesian coordinates, "
                "which FixAtoms, FixCartesian, FixedPlane, FixedLine and FixSymmetry define; "
                "use one of these, or an ASE optimizer (BFGS) for bond, angle or "
                "internal-coordinate constraints"
            )
    _check_finite(atoms, filtered or np.any(atoms.pbc))
    if filtered or np.any(atoms.pbc):
        _check_cell(atoms, filtered)
    else:
        _check_closest_approach(atoms)
    return GeneralizedCoordinates.from_optimizable(system)


def _check_finite(atoms, periodic):
    """Refuse a position that is NaN or inf, and such a cell where it counts (a cell
    filter, a periodic axis)."""
    bad = np.flatnonzero(~np.isfinite(atoms.positions).all(axis=1))
    if len(bad):
        raise ValueError(
            f"atom {bad[0]} has a position that is not a finite number "
            f"({atoms.positions[bad[0]].tolist()}): give every atom finite coordinates"
        )
    if periodic and not np.isfinite(np.array(atoms.cell)).all():
        raise ValueError(
            f"the cell holds a number that is not finite ({np.array(atoms.cell).tolist()}): "
            "give every lattice vector finite components"
        )


def _check_cell(atoms, filtered):
    """Refuse a periodic cell of zero volume and atoms closer than 0.5 Å (across the
    boundary too)."""
    cell = np.array(atoms.cell)
    axes = np.ones(3, dtype=bool) if filtered else np.asarray(atoms.pbc, dtype=bool)
    lengths = np.linalg.norm(cell, axis=1)
    if (lengths[axes] < 1e-6).any() or np.linalg.matrix_rank(cell[axes], tol=1e-6) < axes.sum():
        raise ValueError(
            "the cell has zero volume along its periodic axes: give every periodic "
            "lattice vector a length (atoms.cell), or set atoms.pbc = False for a molecule"
        )
    _check_closest_approach(atoms)


def _check_closest_approach(atoms):
    """Refuse two atoms closer than ``CLOSEST_APPROACH`` Å, a molecule's or a periodic
    system's (across the boundary too): no calculator is asked about such a pair."""
    first, second, distances = neighbor_list("ijd", atoms, CLOSEST_APPROACH)
    if not len(distances):
        return
    closest = int(np.argmin(distances))
    pair = sorted((int(first[closest]), int(second[closest])))
    periodic = bool(np.any(atoms.pbc))
    raise ValueError(
        f"atoms {pair[0]} and {pair[1]} are {distances[closest]:.3f} Å apart"
        f"{' (across the periodic boundary?)' if periodic else ''}, closer than "
        f"{CLOSEST_APPROACH} Å: separate them{' or enlarge the cell' if periodic else ''}"
    )
