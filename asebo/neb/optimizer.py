"""BONEB: a nudged elastic band relaxed on a GP of the energies and forces computed.

An ASE optimizer of the band (:class:`ase.optimize.optimize.Optimizer` of an
:class:`ase.mep.NEB`): ``run``, ``irun``, ``attach``, ``nsteps``, ``max_steps``, the
trajectory (one band per step, as ASE's NEB with BFGS writes it) and ``neb.iterimages()``
behave as with ASE's own optimizers, so that :class:`ase.mep.NEBTools`, ``ase nebplot``
and :class:`ase.mep.AutoNEB` take it. One step is one call of one moving image.

One GP (:class:`asebo.model.gp.EnergyForceGP`) learns every image ever computed, the
endpoints included, and takes its length scale from all of them
(``hyper_window`` of :class:`asebo.optimize.settings.BandSettings`); beyond its dense
covariance each moving image takes a GP of the calls nearest its own latest
(:class:`asebo.neb.image_models.ImageModels`).
Each step relaxes a copy of the band on the GP's posterior mean with ASE's own NEB forces
(tangent, springs, climbing image) and an ASE optimizer, within a trust radius of the
configurations computed (:func:`asebo.neb.relax.relax_on_model`; the radius follows the
model's force error at each call, :func:`asebo.optimize.walk_trust.adapted_radius`), then
computes ONE image (:mod:`asebo.neb.choice`). Where the NEB forces of the band (the
computed values where an image was computed at its place, the GP's elsewhere) are
already below ``fmax``, the band is kept as it is and its images not yet computed are
computed there. The band has converged when every moving image has been computed at its
place and ASE's NEB forces on those computed energies and forces are below ``fmax``, the
climbing image's included (with :class:`ase.mep.DyNEB`'s dynamic relaxation, each image
below its scaled criterion).
"""

import os
from typing import ClassVar

import numpy as np
from ase.optimize import FIRE
from ase.optimize.optimize import DEFAULT_MAX_STEPS, Optimizer
from ase.parallel import broadcast, world

from asebo.neb.band import continuous_band, largest_forces
from asebo.neb.band_view import BandState, RecordedBand
from asebo.neb.checks import check_band
from asebo.neb.choice import ImageChoice, describe
from asebo.neb.defaults import MOLECULE_KERNEL
from asebo.neb.image_models import ImageModels
from asebo.neb.record import BandRecord
from asebo.optimize.build import build_surrogate
from asebo.optimize.observed_atoms import ComputedResults
from asebo.optimize.resolve import positive_number, resolve_walk_settings
from asebo.optimize.restart_lock import RestartLock
from asebo.optimize.run_summary import BandSummary
from asebo.optimize.settings import BandSettings
from asebo.optimize.step_log import StepLog
from asebo.optimize.subspace import free_atoms
from asebo.optimize.system_checks import check_constraints_unchanged, check_distinct_files
from asebo.threads import optimizer_threads, with_optimizer_threads


class BONEB(BandSummary, BandState, ImageChoice, Optimizer):
    """A nudged elastic band optimized on a GP surrogate (module docstring).

    Parameters
    ----------
    neb : ase.mep.NEB
        The band, ``climb=True`` for the saddle (``climb`` may be switched on between
        runs). Every image needs a calculator: the endpoints' energies and forces are
        computed once (taken from their calculators' results where these hold them),
        the moving images' calculators are called. ``FixAtoms`` only, the same in every
        image. What BONEB cannot honour is refused before any call
        (:func:`asebo.neb.checks.check_band`).
    restart : str, optional
        JSON file of every image computed (which image, positions, energy, forces), of
        the band and of its endpoints, written after each call; read if it exists, so
        that a band stopped at any moment resumes without a repeated call. The file of
        another band (other endpoints, images or calculator) is refused.
    logfile : file, str or None
        ``'-'`` for standard output: ASE's step lines (the band's highest energy and
        largest NEB force), then the model's energy of the image computed and why it
        was chosen (:attr:`choices`).
    trajectory : str, optional
        ASE trajectory of the band after each step, every image with its energy and
        forces (the computed ones where computed at its place, the model's elsewhere),
        with ASE's description of the optimizer: ``read(trajectory, f"-{len(images)}:")``
        is the last band.
    append_trajectory : bool, optional
        Keep the bands in ``trajectory``; default: where a restart file is read.
    calls_trajectory : str, optional
        ASE trajectory of every image computed, in the order computed (the endpoints
        first), each with its energy and forces.
    prior, kernel : optional
        The GP's prior mean and representation, as for
        :class:`asebo.optimize.optimizer.BOOptimizer`, chosen for the first moving
        image. Defaults: the band's default prior
        (:func:`asebo.model.default_prior.default_prior`: the pair springs for a periodic
        cell, GFN2-xTB for a molecule under an electronic-structure code, else the
        highest energy computed), its choice in the log; the kernel BOOptimizer's for a
        periodic cell, :data:`asebo.neb.defaults.MOLECULE_KERNEL` for a molecule.
    trust_radius, max_trust_radius, uncertainty, model_fmax, model_steps : optional
        Shortcuts into ``settings`` (:data:`asebo.optimize.resolve.WALK_SHORTCUTS`): the
        first trust radius (Å; a restart file's radius is taken over), the largest it
        grows to (Å; ``maxstep``, ASE's name, is the same setting), the GP's standard
        deviation (eV) above which an image is computed before the climbing image, the
        NEB forces (eV/Å) and the steps of the relaxation on the model. A value given
        both ways must be the same.
    settings : asebo.optimize.settings.BandSettings, optional
        Every setting of the band, resolved once
        (:func:`asebo.optimize.resolve.resolve_walk_settings`) into :attr:`settings`.
    band_optimizer : ase optimizer class
        What relaxes the band on the GP (FIRE, BFGS...).
    gp_options : dict, optional
        Passed to :class:`asebo.model.gp.EnergyForceGP`, over ``hyper_window`` of the
        settings and ``cg_max_iter`` 0 (beyond the
        dense covariance each image takes the GP of the calls nearest its own latest).
    comm : communicator
        Ranks that run the band together (GPAW's): rank 0 relaxes it on the GP and
        chooses the image, every rank computes that image; rank 0 alone writes.
    threads : int, optional
        Threads of the optimizer's own work, given back to the calculator after it
        (:func:`asebo.threads.optimizer_threads`: ``OMP_NUM_THREADS`` where set, else 1).

    Attributes
    ----------
    settings : asebo.optimize.settings.BandSettings
        Resolved.
    choices : list of dict
        Why each image was computed, in order: ``image`` (its index in the band),
        ``reason`` (:data:`asebo.neb.choice.REASONS`) and ``relaxation`` (how the
        relaxation on the model ended, :data:`asebo.neb.defaults.RELAXATION_ENDS`).
    calls : int
        Calls of the moving images' calculators by this optimizer.
    """

    defaults: ClassVar[dict] = {**Optimizer.defaults}

    def __init__(
        self,
        neb,
        restart=None,
        logfile="-",
        trajectory=None,
        append_trajectory=None,
        calls_trajectory=None,
        prior=None,
        kernel=None,
        trust_radius=None,
        max_trust_radius=None,
        uncertainty=None,
        model_fmax=None,
        model_steps=None,
        band_optimizer=FIRE,
        gp_options=None,
        comm=world,
        threads=None,
        maxstep=None,
        settings=None,
        **kwargs,
    ):
        self._held = check_band(neb)  # what each image's constraints hold: checked at each run
        continuous_band(neb.images)  # wrapped images brought back onto one path
        check_distinct_files(
            restart=restart,
            logfile=logfile,
            trajectory=trajectory,
            calls_trajectory=calls_trajectory,
        )
        self.threads = optimizer_threads(threads)
        self.neb, self.images = neb, neb.images
        moving = self.images[1]
        periodic = bool(np.any(moving.pbc))
        if not periodic and kernel is None:  # no reference configuration across a reaction
            kernel = MOLECULE_KERNEL if len(moving) >= 3 else "cartesian"
        self.settings = resolve_walk_settings(
            BandSettings,
            settings,
            trust_radius=trust_radius,
            max_trust_radius=max_trust_radius,
            maxstep=maxstep,
            uncertainty=uncertainty,
            model_fmax=model_fmax,
            model_steps=model_steps,
        )
        self.maxstep = self.settings.max_trust_radius  # ASE's name, in the description
        self.trust_radius = self.settings.trust_radius
        gp_options = {
            "hyper_window": self.settings.hyper_window,
            "cg_max_iter": 0,
            **(gp_options or {}),
        }
        coordinates = {"numbers": moving.numbers, "periodic": periodic}
        band = (coordinates, 3 * len(moving), prior, kernel, {"gp_options": gp_options}, "band")
        self.surrogate, _, self.prior_choice = build_surrogate(moving, *band, self.threads)
        self.representation, self.prior = self.surrogate.representation, self.surrogate.prior
        self.models = ImageModels(self.surrogate.gp, len(self.images))
        self.band_optimizer = band_optimizer
        self._free = free_atoms(moving).all(axis=1)  # (n,): the atoms the band moves
        self._computed = ComputedResults()  # the force-consistent energy where given
        lock = RestartLock.acquire(restart, comm)  # before any file is read or opened
        with lock.released_on_error():
            self.record = BandRecord(self.images, restart, calls_trajectory, comm)
            if append_trajectory is None:
                append_trajectory = restart is not None and os.path.isfile(restart)
            files = {"logfile": logfile, "trajectory": trajectory}
            super().__init__(
                neb, restart, append_trajectory=append_trajectory, comm=comm, **files, **kwargs
            )
        self.closelater(lock)
        self.closelater(self.record)
        self.optimizable = RecordedBand(self)
        self.step_log = StepLog(self.logfile, type(self).__name__)
        self._stopped = False  # whether the trust radius stopped the last relaxation
        self._state = None  # (key, evaluated band, by every rank) of the band last evaluated
        self.calls = 0

    def initialize(self):
        """A new band: nothing to take from a restart file."""
        self.choices = []

    def read(self):
        """The band of the restart file: its moving images, trust radius and choices."""
        state = self.record.observations.state
        for image, positions in zip(self.images[1:-1], self.record.band):
            image.positions = positions
        self.trust_radius = float(state["trust_radius"])
        self.choices = list(state.get("choices", []))

    @property
    def positions(self):
        """Every image's positions (i, n, 3), the endpoints included."""
        return np.array([image.positions for image in self.images])

    @with_optimizer_threads
    def _chosen(self):
        """The image to compute and where (:meth:`_choice`), the moving images' positions
        (i - 2, n, 3) after the relaxation on the model, and whether it stopped."""
        return self._choice(), self.positions[1:-1], self._stopped

    def irun(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """ASE's ``irun``, after the endpoints are computed (once); ``fmax`` (eV/Å) must
        be a number > 0."""
        self._start(fmax)
        return super().irun(fmax=fmax, steps=steps)

    def run(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """Optimize the band until its computed NEB forces are below ``fmax`` (eV/Å), or
        ``steps`` calls of the moving images; return whether it converged."""
        self._start(fmax)
        return super().run(fmax=fmax, steps=steps)

    def _start(self, fmax):
        """Check ``fmax`` and the constraints, write the prior's choice, compute the
        endpoints once."""
        self.fmax = positive_number("fmax", fmax, None)
        for image, held in zip(self.images, self._held):
            check_constraints_unchanged(held, image, type(self).__name__)
        if self.prior_choice is not None:
            self.step_log.notes([self.prior_choice])
            self.prior_choice = None
        last = len(self.images) - 1
        for index in (0, last):
            image = self.images[index]
            if self.record.find(image.positions) is None:
                energy, forces = self._computed.results(image)  # (), (n, 3)
                self.record.add(image, index, energy, forces, self.positions[1:-1], self._saved())

    def log(self, gradient):
        """ASE's step line (the band's highest energy and largest NEB force), then the
        model's energy of the image computed and why it was chosen."""
        state = self.band_state()
        fmax = float(largest_forces(state.band_forces).max())
        latest = self.choices[-1] if self.nsteps > 0 and self.choices else None
        predicted = None if latest is None else latest["predicted"]
        reason = "" if latest is None else describe(latest)
        self.step_log.header()
        self.step_log.step(self.nsteps, float(state.emax), fmax, predicted, reason)

    def todict(self):
        return {**super().todict(), "trust_radius": self.trust_radius, "calls": self.calls}

    def _saved(self):
        """What the restart file keeps of the run besides the calls."""
        return {"trust_radius": self.trust_radius, "choices": self.choices}

    def _fitted(self):
        """Each image's GP, fitted to every image computed
        (:meth:`asebo.neb.image_models.ImageModels.fitted`)."""
        return self.models.fitted(self.surrogate, self.record)

    def step(self):
        """Relax the band on the model, choose one moving image (rank 0, broadcast),
        compute it: the model's work on the optimizer's threads, the call on the
        caller's."""
        chosen = self._chosen() if self.comm.rank == 0 else None
        choice, band, self._stopped = broadcast(chosen, root=0, comm=self.comm)
        for image, positions in zip(self.images[1:-1], band):
            image.positions = positions
        self._compute(*choice)
