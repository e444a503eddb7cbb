"""BOOptimizer: Bayesian optimization of a molecule's geometry, an ASE optimizer.

Each step fits :class:`asebo.model.gp.EnergyForceGP` to every energy and force computed
so far, minimises the lower confidence bound ``mu - kappa sigma`` (Wong and Kolter,
eq. 35) inside a trust box around the lowest-energy configuration, and moves the
atoms there; ASE's loop then calls the calculator. The trust box grows when the GP
predicted the new energy well and shrinks when it did not
(:class:`asebo.optimize.trust.TrustRegion`), and shrinks before the call where the GP doubts
its own proposal (:func:`asebo.optimize.trust.check_confident`).

Every configuration is computed at most once: the observations
(:class:`asebo.optimize.observations.Observations`) answer for a configuration already seen.
Each evaluation is written to the restart file as soon as the calculator returns,
and each proposal before it is computed, so a run killed at any moment and started
again with the same restart file goes on with the same observations, repeats no
calculator call and writes every evaluation to the trajectory exactly once.
"""

import os
import time
from typing import ClassVar

import numpy as np
import torch
from ase import Atoms
from ase.constraints import FixAtoms, FixCartesian
from ase.optimize.optimize import OptimizableAtoms, Optimizer
from ase.parallel import broadcast, world

from asebo.kernels.configuration import configuration_kernel
from asebo.model.gp import CalculatorPrior, EnergyForceGP, PriorCalculationError
from asebo.model.lindh import LindhModel
from asebo.model.lindh_prior import RecentredLindh
from asebo.model.metric import HessianMetric, InternalMetric
from asebo.model.priors import AUTO, MODEL_PRIORS, automatic_prior, resolve_prior
from asebo.optimize.flat_centres import FLAT_CENTRE_TILT, flat_centres, tilted
from asebo.optimize.observations import (
    Observations,
    RestartError,  # noqa: F401  raised through BOOptimizer(restart=...)
    TrajectoryFrames,
)
from asebo.optimize.rigid import moved_rigidly, rigid_part, rigid_step
from asebo.optimize.search import minimize_lcb
from asebo.optimize.trust import (
    FLOOR,
    FORCE_STEP,
    SHRINK,
    TrustRegion,
    UncertainStepError,
    check_confident,
)

SUPPORTED_CONSTRAINTS = (FixAtoms, FixCartesian)
SEARCH_RETRIES = 3  # smaller trust boxes searched after a search that failed
NEAR_LINEAR = 0.15  # second / first singular value of the centred positions below this
METRIC_KERNELS = ("internal", "anisotropic")  # the GP's Gaussian kernel on a metric's features
# the GP's configuration kernel (asebo.kernels.configuration.KERNELS) of each optimizer kernel
GP_KERNELS = {
    "internal": "cartesian",
    "anisotropic": "cartesian",
    "svd": "svd",
    "cartesian": "cartesian",
}
RECENTRE = 0.3  # eV: the Lindh prior's default recentring, except with kernel='internal'
INTERNAL_RECENTRE = 2.0  # eV: the same with kernel='internal' (its trend carries the rest)
TREND = 30.0  # slope variance of the GP's linear trend / a gradient's variance (kernel='internal')
PRIOR_CURVATURE = 1.0  # the GP's random scale on a prior calculator's curvature (its gp_options)
CALCULATOR_PRIOR_MAXSTEP = 0.6  # Å: default maxstep under a prior calculator
CALCULATOR_PRIOR_TRUST_RADIUS = 0.13  # Å: default first trust radius under a prior calculator
# InternalMetric.conditioning below this at a configuration computed: the internal
# coordinates fold there, and the kernel takes aligned positions instead
FOLDED = 0.2
NEW = 1e-6  # Å: a proposal closer than this to a configuration seen teaches the model nothing


class _ObservedAtoms(OptimizableAtoms):
    """ASE's view of the atoms that computes each configuration once.

    ``observe()`` returns the energy and the unconstrained forces (n, 3) at the
    atoms' positions, calling the calculator only for a configuration not seen
    before.
    """

    def __init__(self, atoms, observe):
        super().__init__(atoms)
        self.observe = observe

    def get_gradient(self):
        forces = self.observe()[1].copy()  # (n, 3)
        for constraint in self.atoms.constraints:
            constraint.adjust_forces(self.atoms, forces)
        return -forces.ravel()

    def get_value(self):
        return self.observe()[0]


class BOOptimizer(Optimizer):
    """Bayesian optimization with a GP on energies and forces (Wong and Kolter).

    Parameters
    ----------
    atoms : ase.Atoms
        The molecule, with a calculator attached. ``FixAtoms`` and ``FixCartesian``
        constraints are honoured; other constraints and filters are refused.
    restart : str, optional
        JSON file holding every observation; read if it exists, written each call.
        A finished run read again reports convergence with no calculator call.
    logfile : file, str or None
        ``'-'`` for standard output. Each line adds the model's predicted energy:
        the lowest energy computed less the model's drop from there.
    trajectory : str, optional
        ASE trajectory of every evaluated configuration, each written once.
    append_trajectory : bool, optional
        Keep the frames already in ``trajectory``. Default: keep them when a restart
        file is read (its observations already there are not written again), start
        the file afresh otherwise. Started afresh after a restart file is read, the
        trajectory receives every observation of the restart file.
    prior : ase calculator, 'lindh', 'max', 'mean', 'auto' or float, optional
        Prior mean of the GP. A cheap calculator makes the GP learn the difference
        to it (Δ-learning), with a random scale on its curvature
        (``gp_options['prior_curvature']``, default ``PRIOR_CURVATURE``;
        :class:`asebo.kernels.prior_scale.PriorCurvature`). ``'auto'``: GFN2-xTB
        when the target is another calculator and GFN2-xTB describes the system, the
        default otherwise (:func:`asebo.model.priors.automatic_prior`; the choice is
        written to the log).
        A prior calculator that fails where the search of the model takes it (an SCF
        that does not converge) halves the trust radius, up to ``SEARCH_RETRIES``
        times, and then turns that step into a step along the forces, with a line in
        the log each time; one that fails at a configuration already computed stops
        the run with :class:`asebo.model.gp.PriorCalculationError`.
        ``'lindh'`` (the default for molecules) is
        :class:`asebo.model.lindh.LindhModel`, harmonic bonds, bends and torsions with Lindh's
        model force constants around the first configuration computed (see
        ``recentre``), no second calculator. A constant: the highest (``'max'``,
        the default for periodic cells) or mean energy seen, or a number.
    kappa : float
        Exploration weight of the lower confidence bound, >= 0; 0 minimises the mean.
    recentre : float
        With the ``'lindh'`` prior: when the model puts the lowest-energy
        configuration more than ``recentre`` eV above its minimum, the model is
        rebuilt around that configuration (:class:`asebo.model.lindh_prior.RecentredLindh`).
        By default ``INTERNAL_RECENTRE`` (2 eV) with the ``'internal'`` kernel, whose
        linear trend carries the way from the first configuration over smaller
        misfits (a model rebuilt under it changes the features too; beyond 2 eV the
        start's model fails: PF3 drawn flat took 205 calls with no recentring, 11
        with it), and 0.3 eV with the others.
    maxstep : float
        Largest displacement of any atom in one step, Å. Default 0.2, and
        ``CALCULATOR_PRIOR_MAXSTEP`` (0.6) under a prior calculator, whose surface
        holds far from the configurations computed; the trust region still grows to
        it one good prediction at a time. A search that ends further away is cut back
        to ``maxstep`` on the straight line; where the model predicts that step at or
        above its own energy at the lowest configuration seen, the search is repeated
        in a box half the size (up to ``SEARCH_RETRIES`` times), with a line in the log.
    trust_radius : float
        Initial half-width of the trust box, Å per coordinate. Default 0.1, and
        ``CALCULATOR_PRIOR_TRUST_RADIUS`` (0.13) under a prior calculator. Where the
        model's predicted drop at its proposal is below ``asebo.optimize.trust.CONFIDENCE``
        (3) standard deviations of its own uncertainty there, the search is repeated
        in a box half the size before any call (up to ``SEARCH_RETRIES`` times), with
        a line in the log (:func:`asebo.optimize.trust.check_confident`).
    kernel : {'internal', 'anisotropic', 'svd', 'cartesian'}, optional
        ``'internal'`` (the default for molecules that it describes): the Gaussian kernel on the
        delocalized internal coordinates of the Lindh model's stretches, bends and
        torsions, scaled by its Hessian, a length per direction
        (:class:`asebo.model.metric.InternalMetric`; the model and reference are those of
        the ``'lindh'`` prior, or a Lindh model of the first configuration with
        another prior), plus a linear trend in them (``gp_options['trend']``,
        default ``TREND``; :class:`asebo.kernels.trend.LinearTrend`). Molecules
        close to a straight line (:func:`is_near_linear`), or whose internal
        coordinates do not describe every vibration at the start, take
        ``'anisotropic'`` by default; so does a run once the internal coordinates
        fold at a configuration it computed (:meth:`asebo.model.metric.InternalMetric.conditioning`
        below ``FOLDED``: a planar centre relaxed from a pyramidal start), with a log line.
        ``'anisotropic'``: the Gaussian kernel on positions aligned onto the
        reference and scaled along the eigenvectors of the Lindh Hessian there
        (:class:`asebo.model.metric.HessianMetric`). Molecules close to a straight line
        (:func:`is_near_linear`) take these features, not aligned: their rotation
        about the axis hangs on small displacements across it. ``'svd'``: the rotation-invariant
        SVD kernel with one length scale (Wong and Kolter). ``'cartesian'``: the
        Gaussian kernel on Cartesian positions, the default for periodic cells and
        with ``FixCartesian`` constraints.
    gp_options : dict, optional
        Passed to :class:`asebo.model.gp.EnergyForceGP` (``gamma``, ``fit_gamma``,
        ``energy_noise``, ``gradient_noise``, ``trend``...). ``proper`` and ``radial``
        go to the GP's kernel object of ``kernel`` (:data:`GP_KERNELS`), unless
        ``gp_options['kernel']`` gives the kernel object itself.
    comm : communicator
        Ranks that take the same step: rank 0 computes it and broadcasts it.

    Notes
    -----
    A nitrogen, phosphorus, arsenic or antimony atom outside rings whose three
    neighbours lie flat with it in the first configuration, and which no force there
    pushes out of plane (:func:`asebo.optimize.flat_centres.flat_centres`), sits on a mirror
    plane that no force breaks, where a pyramidal centre has its inversion saddle.
    Under the Lindh or a constant prior the first step tilts each such atom
    ``FLAT_CENTRE_TILT`` (0.1 Å) out of the plane; under a prior calculator the first
    search also starts from the tilted configuration where the prior puts it lower.
    A line in the log names the atoms.

    A rotation-invariant kernel predicts forces without net force or torque, but a
    calculator on a real-space grid returns them with some (the egg-box effect, a
    few hundredths of an eV/Å for water in GPAW at h = 0.2 Å). Where the forces of
    the lowest-energy configuration meet ``fmax`` without their net force and
    torque (:func:`asebo.optimize.rigid.rigid_part`) but not with them, the model's proposal
    is also moved as a whole along them, ``FORCE_STEP`` (0.02 Å) at most per atom,
    halved for every call since the lowest energy was found
    (:func:`asebo.optimize.rigid.rigid_step`); otherwise the model's steps would shrink
    towards the configuration computed, one call after another. Only with every
    coordinate free. A line in the log says so.

    A run resumed from its restart file, however often, proposes exactly what the
    uninterrupted run proposed: the observations, the trust region, the prior and
    the pending proposal are restored bit for bit, and the model is fitted to the
    same numbers. The paths agree to the last bit when the calculator does; an SCF
    code started from another density (a fresh GFN2-xTB calculator) differs by about
    1e-7 eV/Å in its forces, and the paths by as much.

    References
    ----------
    E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning
    from geometric data", Carnegie Mellon University (preprint), section "Bayesian
    optimization", eqs. 34-35.
    """

    defaults: ClassVar[dict] = {
        **Optimizer.defaults,
        "maxstep": 0.2,
        "kappa": 0.1,
        "trust_radius": 0.1,
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
        **kwargs,
    ):
        _check_atoms(atoms)
        self.kappa = _number("kappa", kappa, self.defaults["kappa"], positive=False)
        self.kernel = _choose_kernel(atoms, kernel)
        if recentre is None:
            recentre = INTERNAL_RECENTRE if self.kernel == "internal" else RECENTRE
        self.recentre = recentre
        if not (isinstance(self.recentre, (int, float)) and self.recentre >= 0):
            raise ValueError(
                f"recentre must be an energy >= 0 in eV (inf: never), got {self.recentre!r}"
            )
        self._metric = None  # (centre, metric) of the internal or anisotropic kernel
        self.prior_reason = None
        if isinstance(prior, str) and prior == AUTO:
            prior, self.prior_reason = automatic_prior(atoms)
            prior = resolve_prior(prior)
        self.prior = _choose_prior(atoms, prior)
        self.gp_options = {
            "trend": TREND if self.kernel == "internal" else 0.0,
            "prior_curvature": PRIOR_CURVATURE if isinstance(self.prior, CalculatorPrior) else 0.0,
            **_gp_kernel_options(self.kernel, gp_options),
        }
        if isinstance(self.prior, CalculatorPrior):
            longest_step, first_radius = CALCULATOR_PRIOR_MAXSTEP, CALCULATOR_PRIOR_TRUST_RADIUS
        else:
            longest_step, first_radius = self.defaults["maxstep"], self.defaults["trust_radius"]
        self.maxstep = _number("maxstep", maxstep, longest_step)
        self.initial_trust_radius = _number("trust_radius", trust_radius, first_radius)
        _check_writable("restart", restart)
        _check_writable("trajectory", trajectory)
        self.numbers = atoms.get_atomic_numbers().copy()
        self.gp = None
        self.lindh = RecentredLindh(atoms, self.recentre) if self.prior == "lindh" else None
        super().__init__(
            atoms, restart=restart, logfile=logfile, trajectory=None, comm=comm, **kwargs
        )
        self.optimizable = _ObservedAtoms(atoms, self._observe)
        if self.prior_reason is not None:
            self._write_note(f"prior='auto': {self.prior_reason}")
        resumed = len(self.observations) > 0
        keep = resumed if append_trajectory is None else bool(append_trajectory)
        self.frames = (
            None
            if trajectory is None
            else TrajectoryFrames(
                trajectory,
                atoms,
                keep,
                len(self.observations),
                comm=comm,
                description=self.todict(),
            )
        )

    # ---- state ----------------------------------------------------------------------
    def initialize(self):
        self.observations = Observations(self.numbers, self.restart, self.comm)
        self.trust = TrustRegion(self.initial_trust_radius, self.maxstep)
        self.predicted_energy = None  # the GP's energy of the configuration to compute next

    def read(self):
        self.observations = Observations.load(self.numbers, self.restart, self.comm)
        state = self.observations.state
        self.trust = TrustRegion(float(state["trust_radius"]), self.maxstep)
        self.predicted_energy = state.get("predicted_energy")
        pending = state.get("pending")
        # the configuration to compute next, or the last one computed, which the
        # observations answer for without a call
        self.atoms.set_positions(
            self.observations.positions[-1] if pending is None else np.asarray(pending, dtype=float)
        )

    def todict(self):
        description = super().todict()
        description.update(
            kappa=self.kappa,
            trust_radius=self.initial_trust_radius,
            kernel=self.kernel,
            recentre=self.recentre,
            prior=(
                type(self.prior.calculator).__name__
                if isinstance(self.prior, CalculatorPrior)
                else self.prior
            ),
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
        """Positions of every configuration computed, in order, (n, 3) each, Å."""
        return self.observations.positions

    @property
    def lindh_model(self):
        """The :class:`asebo.model.lindh.LindhModel` of the ``'lindh'`` prior (None before
        a fit)."""
        return None if self.lindh is None else self.lindh.model

    @property
    def forces(self):
        """Unconstrained forces of every configuration computed, (n, 3) each, eV/Å."""
        return self.observations.forces

    # ---- observations ---------------------------------------------------------------
    def _observe(self):
        """Energy and forces (n, 3) at the atoms' positions; computed if not seen before."""
        positions = self.atoms.get_positions()
        index = self.observations.find(positions)
        if index is None:
            energy = self.atoms.get_potential_energy()
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
            index = self.observations.append(positions, energy, forces)
            self.observations.save(
                trust_radius=self.trust.radius, predicted_energy=self.predicted_energy, pending=None
            )
        if self.frames is not None:
            self.frames.sync(self.observations)
        return self.observations.energies[index], self.observations.forces[index]

    # ---- the step -------------------------------------------------------------------
    def step(self):
        """Judge the last proposal, propose the next configuration, move the atoms there."""
        energies = self.observations.energies
        if self.predicted_energy is not None and len(energies) > 1:
            self.trust = self.trust.after(min(energies[:-1]), self.predicted_energy, energies[-1])
        proposal = self._propose() if self.comm.rank == 0 else None
        proposal, self.predicted_energy, self.trust = broadcast(proposal, root=0, comm=self.comm)
        self.atoms.set_positions(proposal)
        self.observations.save(
            trust_radius=self.trust.radius,
            predicted_energy=self.predicted_energy,
            pending=self.atoms.get_positions(),
        )

    def fit_model(self):
        """Fit the GP to every observation so far and return it."""
        positions, energies, forces = self.observations.arrays()
        prior = self.prior if self.lindh is None else self.lindh.prior(positions, energies)
        if self.gp is None:
            self.gp = EnergyForceGP(prior=prior, **self.gp_options)
        self.gp.prior = prior
        if self.kernel in METRIC_KERNELS:
            self.gp.metric = self._kernel_metric(positions)
        # one GP across steps: it keeps the kernel structure of the configurations seen
        return self.gp.fit(positions, energies, forces)

    def _kernel_metric(self, positions):
        """The metric of the Lindh model: the prior's, around its centre, or one of the
        first configuration; rebuilt when the model is. :class:`asebo.model.metric.InternalMetric`
        with ``kernel='internal'`` where its coordinates describe every vibration at
        the centre and at every configuration computed, else
        :class:`asebo.model.metric.HessianMetric` (aligned positions, not aligned for a
        near-linear molecule)."""
        centre = 0 if self.lindh is None else self.lindh.centre
        if self._metric is None or self._metric[0] != centre:
            metric = self._new_metric(positions[centre], internal=self.kernel == "internal")
            self._metric = (centre, metric)
        metric = self._metric[1]
        if isinstance(metric, InternalMetric):
            worst = min(metric.conditioning(x) for x in positions)
            if worst < FOLDED:
                self._write_note(
                    "the internal coordinates fold at a configuration computed (their "
                    f"Jacobian keeps {worst:.2g} of its smallest singular value): the "
                    "kernel takes aligned positions instead"
                )
                self._metric = (centre, self._new_metric(positions[centre], internal=False))
        return self._metric[1]

    def _new_metric(self, reference, internal):
        """The Lindh model's metric at ``reference`` (n, 3): internal coordinates if
        ``internal`` and they describe every vibration there, else aligned positions."""
        model = LindhModel(reference, self.numbers) if self.lindh is None else self.lindh.model
        align = not is_near_linear(reference)
        if internal and align:
            try:
                return InternalMetric.from_model(model, reference)
            except ValueError as error:
                self._write_note(f"{error}: the kernel takes aligned positions instead")
        return HessianMetric.from_model(model, reference, align=align)

    def _free_coordinates(self):
        """Boolean mask (n, 3) of the coordinates no constraint holds."""
        free = np.ones((len(self.atoms), 3), dtype=bool)
        for constraint in self.atoms.constraints:
            if isinstance(constraint, FixAtoms):
                free[constraint.get_indices()] = False
            elif isinstance(constraint, FixCartesian):
                free[constraint.index] &= ~np.asarray(constraint.mask, dtype=bool)
        return free

    def _propose(self):
        """The next configuration (n, 3) to compute, the GP's energy there (None when the
        prior calculator cannot tell) and the trust region (widened for a step along
        the forces)."""
        gp = self.fit_model()
        best = self.observations.best()
        centre = self.observations.positions[best]  # (n, 3)
        starts = (
            [centre]
            if best == len(self.observations) - 1
            else [centre, self.observations.positions[-1]]
        )
        free = self._free_coordinates()
        centres, normals = self._flat_start_centres(free)
        tilt = len(centres) > 0 and not isinstance(self.prior, CalculatorPrior)
        if len(centres) and not tilt:
            tilted_start = tilted(centre, centres, normals)
            if self._prior_descends(centre, tilted_start):
                # the prior calculator puts the tilted centres lower: search from there too
                starts = [*starts, tilted_start]
                self._write_note(
                    f"{_atoms_named(self.numbers, centres)} flat in the start, lower "
                    "tilted in the prior: the search also starts with them tilted out of plane"
                )
        trust = self.trust
        best_energy = self.observations.energies[best]
        seen = True  # until a search ends at a configuration not computed yet
        # where only rigid forces are left the shape has converged: the model has no
        # drop left to be confident of, and the rigid move below does the work
        rigid_left = self._only_rigid_forces_left(best, free)
        for attempt in range(SEARCH_RETRIES + 1):
            try:
                found, _ = minimize_lcb(
                    gp,
                    torch.as_tensor(np.array(starts)),
                    torch.as_tensor(centre),
                    trust.radius,
                    torch.as_tensor(free.reshape(-1)),
                    self.kappa,
                )
                positions = _shortened_step(gp, centre, found.numpy(), self.maxstep)
                if attempt < SEARCH_RETRIES and trust.radius > FLOOR and not rigid_left:
                    check_confident(gp, centre, positions)
            except (PriorCalculationError, ShortenedStepError, UncertainStepError) as error:
                # the prior calculator failed at a configuration the search tried, the
                # search went beyond maxstep and the step cut back to it leaves the
                # model's descent, or the model's own uncertainty there leaves its
                # descent in doubt: search a smaller box, closer to the configurations
                # computed (the last box's proposal stands, whatever its uncertainty)
                trust = trust.shrunk()
                self._write_note(f"{error}; the trust radius is halved to {trust.radius:.3g} Å")
                continue
            seen = self.observations.find(positions, NEW) is not None
            break
        if tilt:
            # the Lindh model holds the centres flat: tilt them, and let the forces
            # there tell which way they go; the model did not choose this step, so
            # it is not judged by its prediction
            self._write_note(
                f"{_atoms_named(self.numbers, centres)} flat in the start: the first "
                f"step tilts them {FLAT_CENTRE_TILT:g} Å out of plane"
            )
            proposal = tilted(centre if seen else positions, centres, normals)
            return _within_maxstep(centre, proposal, self.maxstep), None, trust
        if seen:
            # the model sends us back to a configuration already computed, which
            # would teach it nothing: step along the forces instead
            trust = trust.for_force_step()
            positions = self._force_step(best, free, trust.radius)
        elif rigid_left:
            # the model, blind to rigid motions, cannot remove them: its proposal
            # also moves as a whole along them, half as far for every call since the
            # lowest energy (a grid's ripple can make the full step overshoot, and the
            # same step from the same configuration would overshoot again)
            length = FORCE_STEP * SHRINK ** (len(self.observations) - 1 - best)
            self._write_note(
                "the forces without their net force and torque meet fmax: the "
                f"proposal also moves rigidly along them, {length:.3g} Å at most"
            )
            translation, rotation = rigid_step(centre, self.observations.forces[best], length)
            positions = moved_rigidly(positions, translation, rotation)
        try:
            # the model's drop from the centre, anchored at the energy computed there
            mean = gp.predict(np.array([positions, centre]))  # (2,)
            predicted = float(best_energy + mean[0] - mean[1])
        except PriorCalculationError:
            predicted = None  # the trust region then stays as it is after this step
        return positions, predicted, trust

    def _rotation_invariant(self):
        """Whether the GP's kernel is invariant under rotations and translations: the
        SVD kernel, the internal coordinates, or the metric on aligned positions."""
        if self.kernel == "svd":
            return True
        if self.kernel not in METRIC_KERNELS or self._metric is None:
            return False
        metric = self._metric[1]
        return isinstance(metric, InternalMetric) or metric.align

    def _only_rigid_forces_left(self, index, free):
        """Whether observation ``index``'s forces meet ``fmax`` once their net force and
        torque are taken off, but not with them.

        A rotation-invariant model predicts no net force or torque, so no proposal of
        its own removes them: where they alone keep a run from converging (a grid's
        egg-box effect), its steps would shrink towards the configuration already
        computed, one call after another. Only with every coordinate free, where
        rigid motions are symmetries, and within :meth:`run`, which sets ``fmax``.
        """
        fmax = getattr(self, "fmax", None)
        if fmax is None or not free.all() or not self._rotation_invariant():
            return False
        positions = self.observations.positions[index]
        forces = self.observations.forces[index]
        shape_forces = forces - rigid_part(positions, forces)  # (n, 3)
        largest = np.linalg.norm(forces, axis=1).max()
        return np.linalg.norm(shape_forces, axis=1).max() < fmax <= largest

    def _flat_start_centres(self, free):
        """Centres (c,) and normals (c, 3) of :func:`asebo.optimize.flat_centres.flat_centres` in
        the first configuration, with its forces, while it is the only one computed;
        none otherwise, and none in a periodic cell."""
        if len(self.observations) != 1 or self.atoms.pbc.any():
            return np.empty(0, dtype=int), np.empty((0, 3))
        return flat_centres(
            self.observations.positions[0], self.numbers, free, self.observations.forces[0]
        )

    def _prior_descends(self, start, end):
        """Whether the prior calculator's energy is lower at ``end`` than at ``start``
        (both (n, 3)); False where it fails."""
        try:
            return self.prior.energy_and_forces(end)[0] < self.prior.energy_and_forces(start)[0]
        except PriorCalculationError:
            return False

    def _write_note(self, text):
        """One line in the log, between the step lines."""
        if self.logfile is not None:
            self.logfile.write(f"{type(self).__name__}: {text}\n")

    def _force_step(self, index, free, length):
        """A configuration not seen yet along the free forces of observation ``index``.

        The largest atomic step is ``length``, doubled (up to ``maxstep``) or else
        halved until it reaches a configuration not computed before.
        """
        forces = self.observations.forces[index] * free  # (n, 3)
        direction = forces / max(np.linalg.norm(forces, axis=1).max(), 1e-12)
        lengths = [length * 2.0**k for k in range(12) if length * 2.0**k <= self.maxstep]
        lengths += [length * 0.5**k for k in range(1, 40)]
        for step in lengths:
            positions = self.observations.positions[index] + step * direction
            if self.observations.find(positions, NEW) is None:
                return positions
        raise RuntimeError(
            "every step along the forces leads to a configuration already "
            "computed: the forces vanish on the free coordinates"
        )

    def log(self, gradient):
        if self.logfile is None:
            return
        fmax = self.optimizable.gradient_norm(gradient)
        energy = self.optimizable.get_value()
        now = time.localtime()
        name = type(self).__name__
        if self.nsteps == 0:
            self.logfile.write(
                f"{' ' * len(name)}  {'Step':>4} {'Time':>8} {'Energy':>15}  "
                f"{'fmax':>12} {'Predicted':>15}\n"
            )
        predicted = (
            ""
            if self.predicted_energy is None or self.nsteps == 0
            else f"{self.predicted_energy:15.6f}"
        )
        self.logfile.write(
            f"{name}:  {self.nsteps:3d} {now[3]:02d}:{now[4]:02d}:{now[5]:02d} "
            f"{energy:15.6f} {fmax:15.6f} {predicted}\n"
        )


class ShortenedStepError(RuntimeError):
    """The step cut back to ``maxstep`` ends where the model predicts no descent."""


def _atoms_named(numbers, indices):
    """'atoms N0, N3' for the log."""
    symbols = Atoms(numbers).get_chemical_symbols()
    return "atoms " + ", ".join(f"{symbols[i]}{i}" for i in indices)


def _within_maxstep(centre, proposal, maxstep):
    """``proposal`` (n, 3) itself, or moved towards ``centre`` on the straight line
    until no atom moves more than ``maxstep``."""
    step = proposal - centre  # (n, 3)
    longest = np.linalg.norm(step, axis=1).max()
    return proposal if longest <= maxstep else centre + step * (maxstep / longest)


def _shortened_step(gp, centre, proposal, maxstep):
    """``proposal`` (n, 3) moved towards ``centre`` until no atom moves more than maxstep.

    The search follows the model's surface, which can curve (a group turning about a
    torsion); the shortened step lies on the straight line to its end instead, and
    where that line cuts across the curve (bonds squeezed on the chord of the turn)
    it leaves the descent the search found. The descent is measured from the model's
    mean at ``centre``, as in :func:`asebo.optimize.trust.check_confident`: where the GP allows
    noise, the energy computed there can lie below that mean (a grid's egg-box gain),
    and a step the model puts below the centre is still a descent by the model.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The fitted model.
    centre, proposal : ndarray (n, 3)
        Where the search started (the lowest energy seen) and where it ended.
    maxstep : float
        Largest displacement of any atom, Å.

    Returns
    -------
    ndarray (n, 3)
        ``proposal`` itself when no atom moves more than ``maxstep``.

    Raises
    ------
    ShortenedStepError
        When the model predicts the shortened step at or above its mean at ``centre``.
    """
    positions = _within_maxstep(centre, proposal, maxstep)
    if positions is proposal:
        return proposal
    mean = gp.predict(np.array([positions, centre]))  # (2,)
    rise = float(mean[0] - mean[1])
    if rise >= 0:
        longest = np.linalg.norm(proposal - centre, axis=1).max()
        raise ShortenedStepError(
            f"the search went {longest:.3g} Å, and its step cut back to maxstep = "
            f"{maxstep:.3g} Å ends {rise:.3g} eV above the lowest configuration "
            "seen, by the model"
        )
    return positions


def _number(name, value, default, positive=True):
    """``value`` (``default`` when None) as a finite float, > 0 or >= 0."""
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
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


def _check_atoms(atoms):
    if not isinstance(atoms, Atoms):
        raise TypeError(
            f"BOOptimizer optimizes the positions of an ase.Atoms, got "
            f"{type(atoms).__name__}: filters (cell relaxation, "
            "FrechetCellFilter...) are not supported; relax the cell with an "
            "ASE optimizer such as BFGS"
        )
    if atoms.calc is None:
        raise ValueError(
            "BOOptimizer needs a calculator: attach one first, "
            "e.g. atoms.calc = calculators.get_calculator('gfn2')"
        )
    if len(atoms) < 2:
        raise ValueError(
            f"{len(atoms)} atom(s): there is no geometry to optimize, a single "
            "atom's energy does not depend on its position; give two atoms or "
            "more"
        )
    for constraint in atoms.constraints:
        if not isinstance(constraint, SUPPORTED_CONSTRAINTS):
            raise TypeError(
                f"BOOptimizer cannot honour the constraint {type(constraint).__name__}: it "
                "searches the model over free Cartesian coordinates, which FixAtoms and "
                "FixCartesian define; use one of these, or an ASE optimizer (BFGS) for "
                "bond, angle or internal-coordinate constraints"
            )


def _choose_prior(atoms, prior):
    if hasattr(prior, "get_potential_energy") or hasattr(prior, "calculate"):
        return CalculatorPrior(prior, atoms)
    periodic = bool(np.any(atoms.pbc))
    if prior is None:
        return "max" if periodic else "lindh"
    if isinstance(prior, str):
        if prior not in MODEL_PRIORS:
            raise ValueError(
                f"prior must be an ASE calculator, {', '.join(MODEL_PRIORS)} "
                f"or a number, got {prior!r}"
            )
        if prior == "lindh" and periodic:
            raise ValueError(
                "the Lindh model prior knows the bonds of a molecule, not those "
                "across a periodic cell: use prior='max' (the default for "
                "periodic atoms) or a calculator"
            )
        return prior
    if (
        isinstance(prior, bool)
        or not isinstance(prior, (int, float, np.floating))
        or not np.isfinite(prior)
    ):
        raise ValueError(
            "prior must be an ASE calculator, 'lindh', 'max', 'mean' or a "
            f"finite number of eV, got {prior!r}"
        )
    return float(prior)


def is_near_linear(positions):
    """Whether the atoms at ``positions`` (n, 3) lie close to a line.

    The second singular value of the centred positions (the spread across the
    molecule's axis) below ``NEAR_LINEAR`` times the first (the spread along it):
    acetylene or CO2 rattled by 0.1 Å are near 0.07, bent triatomics above 0.25.
    """
    centred = positions - positions.mean(axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    return bool(s[1] < NEAR_LINEAR * s[0])


def describes(atoms):
    """Whether the internal coordinates of the Lindh model describe every vibration of
    ``atoms`` (:class:`asebo.model.metric.InternalMetric`) and the molecule is not near-linear."""
    positions = atoms.get_positions()
    if is_near_linear(positions):
        return False
    try:
        InternalMetric.from_model(LindhModel(positions, atoms.numbers), positions)
    except ValueError:
        return False
    return True


def _choose_kernel(atoms, kernel):
    periodic = bool(np.any(atoms.pbc))
    cartesian_constraint = any(isinstance(c, FixCartesian) for c in atoms.constraints)
    if kernel is None:
        if periodic or cartesian_constraint:
            return "cartesian"
        return "internal" if describes(atoms) else "anisotropic"
    if kernel == "internal" and not (periodic or cartesian_constraint) and not describes(atoms):
        raise ValueError(
            "the internal coordinates of this molecule do not describe all its "
            "vibrations (a near-linear molecule?): use kernel='anisotropic' (the "
            "default here)"
        )
    if kernel in METRIC_KERNELS and (periodic or cartesian_constraint):
        raise ValueError(
            f"the {kernel} kernel describes the molecule by the Lindh model of its "
            "bonds, invariant to rotations, which a periodic cell or coordinates fixed "
            "along axes do not allow: use kernel='cartesian' (the default there)"
        )
    if kernel == "svd" and periodic:
        raise ValueError(
            "the SVD kernel is invariant to rotations, which a periodic cell is "
            "not: use kernel='cartesian' (the default for periodic atoms) or "
            "set atoms.pbc = False for a molecule"
        )
    if kernel == "svd" and cartesian_constraint:
        raise ValueError(
            "FixCartesian holds coordinates along fixed axes, which the "
            "rotation-invariant SVD kernel cannot tell apart: use "
            "kernel='cartesian' (the default with FixCartesian)"
        )
    if kernel not in GP_KERNELS:
        raise ValueError(
            f"kernel must be 'internal', 'anisotropic', 'svd' or 'cartesian', got {kernel!r}"
        )
    return kernel


def _gp_kernel_options(kernel, gp_options):
    """``gp_options`` with the GP's kernel object of the optimizer's ``kernel``.

    ``proper`` and ``radial`` of ``gp_options`` build that object
    (:func:`asebo.kernels.configuration_kernel`); a ``kernel`` there replaces it.
    """
    options = dict(gp_options or {})
    if "kernel" not in options:
        given = {name: options.pop(name) for name in ("proper", "radial") if name in options}
        options["kernel"] = configuration_kernel(GP_KERNELS[kernel], **given)
    return options
