"""BOSaddle: a first-order saddle point from a guess, on a GP of the calls made.

Each step fits one GP (:class:`asebo.model.gp.EnergyForceGP`) to every configuration
computed, walks on its posterior mean towards the model's saddle point by Sella's
partitioned rational-function optimization (:func:`asebo.saddle.model_search.saddle_on_model`),
no further than a trust radius from the configurations computed, and computes the point
reached: the GP-accelerated saddle search of A. Denzel and J. Kästner (J. Chem. Theory
Comput. 14, 5777 (2018)) with Sella (E. D. Hermes, K. Sargsyan, H. N. Najm and
J. Zádor, J. Chem. Theory Comput. 18, 6974 (2022)) as the search on the model.

The trust radius follows the model's force error at each new point on the atoms no
``FixAtoms`` holds (:func:`asebo.optimize.walk_trust.adapted_radius`), from
``trust_radius`` up to ``max_trust_radius``. Convergence is ASE's test, the largest
computed force below ``fmax``, at a configuration the model puts at a first-order
saddle point: where a second negative curvature of the model is supported by the prior
calculator or the calls, the search steps along it (:mod:`asebo.saddle.order`); where
the forces are converged at a minimum of the model or at a saddle point of higher order
with no step left, the search ends there, not converged. :attr:`BOSaddle.result` says
what it found (:class:`asebo.saddle.result.SaddleResult`); :meth:`BOSaddle.model_order`
counts the model's negative curvatures.

A calculator on a grid gives a molecule's forces a net force and torque (the egg-box
effect) that the rotation-invariant model cannot see. Where only they keep the last
configuration computed from converging
(:func:`asebo.optimize.stages.only_rigid_forces_left`), the walk's end is also moved as
a whole along them, as :class:`asebo.BOOptimizer` does, by the default ``force_step``
of :class:`asebo.optimize.settings.TrustSettings`, times its ``rigid_shrink`` for every
call of that row after the lowest energy in it
(:func:`asebo.optimize.rigid.rigid_move_length`). Where a walk ends on a configuration
computed, and near convergence where the model's forces at the last call were off by
more than ``fmax`` (``newton_near``), the next call is the Newton step on the computed
forces and the model's Hessian (:func:`asebo.saddle.walk.newton_step`); where that was
computed too, the search ends there, not converged.

A periodic system (a slab with ``FixAtoms``, a bulk hop) takes the periodic
representation and prior of :class:`asebo.BOOptimizer`, Sella walks on its model in
Cartesian coordinates, and only the translations are rigid motions.

The optimizer's own work (the fit, the walk, the model's Hessian) runs on
``threads`` threads (:func:`asebo.threads.optimizer_threads`), as
:class:`asebo.BOOptimizer`'s does; the calculator keeps its own.
"""

import numpy as np
from ase.optimize.optimize import DEFAULT_MAX_STEPS, Optimizer
from ase.parallel import broadcast, world

from asebo.optimize.model_hessian import internal_basis, posterior_hessian
from asebo.optimize.observations import TrajectoryFrames, calculator_identity
from asebo.optimize.observed_atoms import ComputedResults
from asebo.optimize.resolve import resolve_walk_settings
from asebo.optimize.restart_lock import RestartLock
from asebo.optimize.run_summary import SaddleSummary
from asebo.optimize.settings import SaddleSettings
from asebo.optimize.step_log import StepLog
from asebo.optimize.subspace import free_atoms
from asebo.saddle.checks import check_saddle_system, checked_observations, run_fmax
from asebo.saddle.endpoint import SaddleEndpoint
from asebo.saddle.mode_probe import StartModeTest
from asebo.saddle.prior import saddle_surrogate
from asebo.saddle.record import SearchRecord, recorded_start, stored_search
from asebo.saddle.walk import ModelWalk
from asebo.threads import optimizer_threads, with_optimizer_threads


class BOSaddle(SaddleSummary, SaddleEndpoint, StartModeTest, ModelWalk, SearchRecord, Optimizer):
    """A first-order saddle point searched on a GP surrogate (module docstring).

    Parameters
    ----------
    atoms : ase.Atoms
        The guess, with a calculator; a molecule or a periodic system of two atoms or
        more, finite positions, no two atoms closer than 0.5 Å. ``FixAtoms`` only.
    restart : str, optional
        JSON file of every configuration computed and of the next one, written after
        each call and read if it exists: a search stopped at any moment resumes without
        a repeated call.
    logfile, trajectory, append_trajectory
        As ASE's: the trajectory holds each configuration of the record once, kept where
        the record has some (:class:`asebo.optimize.observations.TrajectoryFrames`).
    prior, kernel : optional
        As for :class:`asebo.optimize.optimizer.BOOptimizer`; the default prior
        (:func:`asebo.model.default_prior.default_prior`: GFN2-xTB under an
        electronic-structure code, the other GFN-xTB method under tblite, the pair
        springs for a periodic system, else the Lindh model), its choice the log's first
        line; the default kernel internal coordinates where they
        describe the guess (:func:`asebo.optimize.representations.make_representation`).
    trust_radius, max_trust_radius, model_fmax, model_steps : optional
        Shortcuts into ``settings`` (:data:`asebo.optimize.resolve.WALK_SHORTCUTS`): the
        first trust radius (Å; the walk on the model goes no further from the
        configurations computed), the largest it grows to (Å; ``maxstep``, ASE's name,
        is the same setting), the model's forces the walk converges to (eV/Å; default
        ``fmax / 5``) and Sella's steps per walk on the model. A value given both ways
        must be the same.
    settings : asebo.optimize.settings.SaddleSettings, optional
        Every setting, resolved once (:func:`asebo.optimize.resolve.resolve_walk_settings`).
    gp_options : dict, optional
        For :class:`asebo.model.gp.EnergyForceGP`.
    observations : (positions (m, n, 3), energies (m,), forces (m, n, 3)), optional
        Configurations already computed with the same calculator (a band's images:
        :meth:`from_band`), added to a new record; a restart file's record has them.
    comm : communicator
        Ranks searching together (GPAW's): rank 0 walks the model, broadcasts, writes.
    order : int
        Sella's keyword: 1, the only order searched.
    threads : int, optional
        Threads of the optimizer's own work, given back to the calculator after it
        (:func:`asebo.threads.optimizer_threads`: ``OMP_NUM_THREADS`` where set, else 1).

    Attributes
    ----------
    settings : asebo.optimize.settings.SaddleSettings
    result : asebo.saddle.result.SaddleResult or None
        What the search found where it ended (after ``run``).
    """

    def __init__(
        self,
        atoms,
        restart=None,
        logfile="-",
        trajectory=None,
        append_trajectory=None,
        prior=None,
        kernel=None,
        trust_radius=None,
        max_trust_radius=None,
        model_fmax=None,
        model_steps=None,
        gp_options=None,
        observations=None,
        comm=world,
        order=1,
        threads=None,
        maxstep=None,
        settings=None,
        **kwargs,
    ):
        self.threads = optimizer_threads(threads)
        self._held = check_saddle_system(
            atoms, order, restart=restart, logfile=logfile, trajectory=trajectory
        )
        self.rotations = not atoms.pbc.any()  # rigid motions of a molecule, walked internally
        self._given = checked_observations(observations, atoms)
        self.settings = resolve_walk_settings(
            SaddleSettings,
            settings,
            trust_radius=trust_radius,
            max_trust_radius=max_trust_radius,
            maxstep=maxstep,
            model_fmax=model_fmax,
            model_steps=model_steps,
        )
        self.trust_radius = self.settings.trust_radius
        self._computed = ComputedResults()  # the force-consistent energy where given
        model = (atoms, restart, prior, kernel, gp_options, self.threads)
        self.surrogate, why = saddle_surrogate(*model)
        self.representation, self.prior = self.surrogate.representation, self.surrogate.prior
        self.gp = self.surrogate.gp
        self.identity = calculator_identity(atoms.calc)
        self._predicted = None  # (positions (n, 3), forces (n, 3), stopped) of the last walk
        self._order = None  # (key, OrderVerdict or None) of the last configuration judged
        self._order_noted = None  # the key whose verdict the log has
        self._stopped = None  # why the walk ended the run on a configuration computed
        lock = RestartLock.acquire(restart, comm)  # before ASE opens any file
        with lock.released_on_error():
            self._stored = stored_search(restart, atoms, self.identity, comm)
            super().__init__(atoms, restart, logfile, trajectory=None, comm=comm, **kwargs)
            run = (trajectory, append_trajectory, atoms, self.observations)  # each call once
            self.frames = TrajectoryFrames.of_run(*run, comm=comm, description=self.todict())
        self.closelater(lock)
        self.step_log = StepLog(self.logfile, type(self).__name__)
        self.prior_choice = why  # why the default prior, or None
        self.reason = ""  # how the walk to the configuration computed next ended
        self.step_log.notes([note for note in (why, getattr(self.frames, "note", None)) if note])

    @classmethod
    def from_band(cls, band, **kwargs):
        """The saddle search from the highest moving image of a band optimized by
        :class:`asebo.neb.BONEB` (its climbing image once converged), every image
        computed taken as an observation: that image is not computed again. Given an
        existing ``restart`` file, the search resumes from the start it records.

        Parameters
        ----------
        band : asebo.neb.BONEB
            After its ``run``; its images' calculator computes the saddle search's calls.
        **kwargs
            For :class:`BOSaddle`."""
        top = band.record.highest_computed(band.images)
        atoms = top.copy()
        atoms.calc, atoms.positions = top.calc, recorded_start(kwargs.get("restart"), top.positions)
        return cls(atoms, observations=band.record.observations.arrays(), **kwargs)

    def irun(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """Run as a generator; ``fmax`` (eV/Å) must be a positive number."""
        ended = self._walk_from_record(run_fmax(self, fmax))
        if ended is not None:
            return iter([ended])
        return super().irun(fmax=fmax, steps=steps)

    def run(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """Search until the largest force is below ``fmax`` (eV/Å) at a first-order
        saddle point by the model, a minimum or saddle point of higher order there, or
        ``steps`` steps; return whether it converged (:attr:`result` says why not)."""
        ended = self._walk_from_record(run_fmax(self, fmax))
        if ended is not None:
            return ended
        return super().run(fmax=fmax, steps=steps)

    def _walk_from_record(self, fmax):
        """Where the atoms stand on a configuration computed (a search resumed after
        the record of a call and before the walk from it, or after it ended), no call
        is repeated: return whether it converged where the search ends there (its
        forces below ``fmax``, no step off left), else walk from there on the model
        first and return None (the run goes on)."""
        self._stopped = None
        if self.observations.find(self.atoms.positions) is None:
            return None
        self.fmax = fmax
        verdict = self._order_verdict()
        if verdict is not None and verdict.step is None:
            self._note_order()
            return verdict.order == 1
        self.step()
        return None

    def gradient_converged(self, gradient):
        """ASE's test of the forces, at a configuration the model puts at a first-order
        saddle point (:meth:`_order_verdict`). Where the forces are converged with no
        step off left, the model's order there goes to the log and the run ends: not
        converged at a minimum or a saddle point of higher order."""
        if not super().gradient_converged(gradient):
            return False
        verdict = self._order_verdict()
        if verdict is None or verdict.step is not None:
            return False
        self._note_order()
        if verdict.order != 1:
            self.max_steps = self.nsteps  # ASE's loop ends here
        return verdict.order == 1

    def _free_forces(self, index):
        """The forces (n, 3) of observation ``index`` with the constraints applied."""
        forces = self.observations.forces[index].copy()
        for constraint in self.atoms.constraints:
            constraint.adjust_forces(self.atoms, forces)
        return forces

    def log(self, gradient):
        """Record the configuration just computed (every one passes here), then write
        ASE's step line and how the walk to it ended (:meth:`StepLog.step`)."""
        self._record()
        energy = self.optimizable.get_value()
        fmax = self.optimizable.gradient_norm(gradient)
        self.step_log.header()
        self.step_log.step(self.nsteps, energy, fmax, None, self.reason)

    def _fitted(self):
        """The GP fitted to every configuration computed (again only after a new one)."""
        gp, _ = self.surrogate.fitted(self.observations)
        return gp

    @with_optimizer_threads
    def step(self):
        """Walk on the model from the configuration last computed, step off it where
        its forces are converged at a saddle point of higher order
        (:meth:`_order_step`), or probe the start's lowest mode first
        (:meth:`_probe_step`); move the atoms to where the walk or step ends: rank 0
        walks and broadcasts where to."""
        stepped = self._order_step()
        if stepped is not None:
            self._step_off(stepped)
            return
        if self._probe_step():
            return
        self._keep_start_mode()
        walked = self._walk() if self.comm.rank == 0 else None
        self._predicted, self.reason, ended = broadcast(walked, root=0, comm=self.comm)
        following = self._predicted[0]
        if ended is not None:
            self._end_without_call(ended)
        self._save(following)
        self.atoms.positions = following

    def _free(self):
        """The coordinates (n, 3) that no FixAtoms holds."""
        return free_atoms(self.atoms)

    @with_optimizer_threads
    def model_order(self):
        """The number of negative curvatures of the GP's mean at the atoms' positions
        (rigid motions and fixed atoms left out): 1 at a first-order saddle point."""
        positions, free = self.atoms.positions, self._free()
        hessian = posterior_hessian(self._fitted(), positions, free)  # (3n, 3n)
        basis = internal_basis(positions, free, self.rotations)  # (3n, k)
        return int((np.linalg.eigvalsh(basis.T @ hessian @ basis) < 0).sum())

    def todict(self):
        return {**super().todict(), "trust_radius": self.trust_radius}
