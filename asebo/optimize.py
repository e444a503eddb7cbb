"""BOOptimizer: Bayesian optimization of a molecule's geometry, an ASE optimizer.

Each step fits :class:`asebo.gp.EnergyForceGP` to every energy and force computed
so far, minimises the lower confidence bound ``mu - kappa sigma`` (seed 003, eq. 35)
inside a trust box around the lowest-energy configuration, and moves the atoms
there; ASE's loop then calls the calculator. The trust box grows when the GP
predicted the new energy well and shrinks when it did not.

Every evaluation (positions, energy, forces) is written to the restart file as
soon as the calculator returns, together with the next configuration to evaluate,
so a run killed at any moment and started again with the same restart file goes on
with the same observations and repeats no calculator call.
"""

import os
import time

import numpy as np
import torch
from ase.constraints import FixAtoms
from ase.io.jsonio import decode, encode
from ase.optimize.optimize import OptimizableAtoms, Optimizer
from ase.parallel import broadcast, world

from asebo.acquisition import minimize_lcb
from asebo.gp import CalculatorPrior, EnergyForceGP
from asebo.lindh import LindhModel

RESTART_VERSION = 1
MODEL_PRIORS = ("lindh", "max", "mean")  # priors that need no calculator


class RestartError(RuntimeError):
    """A restart file that cannot be used for these atoms."""


class _RecordingOptimizable(OptimizableAtoms):
    """ASE's view of the atoms that reports every new evaluation to the optimizer."""

    def __init__(self, atoms, record):
        super().__init__(atoms)
        self._record = record

    def get_gradient(self):
        gradient = super().get_gradient()
        self._record()
        return gradient


class BOOptimizer(Optimizer):
    """Bayesian optimization with a derivative SVD-kernel GP (seed 003).

    Parameters
    ----------
    atoms : ase.Atoms
        The molecule, with a calculator attached.
    restart : str, optional
        JSON file holding every observation; read if it exists, written each call.
    logfile : file, str or None
        ``'-'`` for standard output. Each line adds the model's predicted energy.
    trajectory : str, optional
        ASE trajectory of every evaluated configuration.
    prior : ase calculator, 'lindh', 'max', 'mean' or float, optional
        Prior mean of the GP. A cheap calculator makes the GP learn the difference
        to it (Δ-learning). ``'lindh'`` (the default for molecules) is
        :class:`asebo.lindh.LindhModel`, harmonic bonds, bends and torsions with Lindh's
        model force constants around the first configuration computed (see
        ``recentre``), no second calculator. A constant: the highest (``'max'``,
        the default for periodic cells) or mean energy seen, or a number.
    kappa : float
        Exploration weight of the lower confidence bound; 0 minimises the mean.
    recentre : float
        With the ``'lindh'`` prior: when the model puts the lowest-energy
        configuration more than ``recentre`` eV above its minimum, the model is
        rebuilt around that configuration, since a harmonic expansion that far from
        its centre says more about the start than about the way down.
    maxstep : float
        Largest displacement of any atom in one step, Å.
    trust_radius : float
        Initial half-width of the trust box, Å per coordinate.
    kernel : {'svd', 'cartesian'}, optional
        The rotation-invariant SVD kernel for molecules (default) or the Gaussian
        kernel on Cartesian positions, the only one allowed for periodic cells.
    gp_options : dict, optional
        Passed to :class:`asebo.gp.EnergyForceGP` (``gamma``, ``fit_gamma``,
        ``energy_noise``, ``gradient_noise``, ``proper``...).
    comm : communicator
        Ranks that take the same step: rank 0 computes it and broadcasts it.

    References
    ----------
    Seed 003 (Wong and Kolter), section "Bayesian optimization", eqs. 34-35.
    """

    defaults = {**Optimizer.defaults, "maxstep": 0.2, "kappa": 0.1, "trust_radius": 0.1,
                "recentre": 0.3}

    def __init__(self, atoms, restart=None, logfile="-", trajectory=None, prior=None,
                 kappa=None, maxstep=None, trust_radius=None, kernel=None, gp_options=None,
                 recentre=None, append_trajectory=False, comm=world, **kwargs):
        _check_atoms(atoms)
        self.kappa = self.defaults["kappa"] if kappa is None else float(kappa)
        self.maxstep = self.defaults["maxstep"] if maxstep is None else float(maxstep)
        self.initial_trust_radius = (self.defaults["trust_radius"] if trust_radius is None
                                     else float(trust_radius))
        self.recentre = self.defaults["recentre"] if recentre is None else float(recentre)
        if not self.recentre >= 0:
            raise ValueError(f"recentre must be an energy >= 0 in eV (inf: never), "
                             f"got {recentre}")
        self.kernel = _choose_kernel(atoms, kernel)
        gp_options = dict(gp_options or {})
        gp_options.setdefault("kernel", self.kernel)
        self.gp_options = gp_options
        self.prior = _choose_prior(atoms, prior)
        self.numbers = atoms.get_atomic_numbers().copy()
        super().__init__(atoms, restart=restart, logfile=logfile, trajectory=trajectory,
                         append_trajectory=append_trajectory, comm=comm, **kwargs)
        self.optimizable = _RecordingOptimizable(atoms, self._record)

    # ---- state ----------------------------------------------------------------------
    def initialize(self):
        self.positions_seen = []  # list of (n, 3)
        self.energies = []  # list of float
        self.forces = []  # list of (n, 3), unconstrained
        self.trust_radius = self.initial_trust_radius
        self.predicted_energy = None
        self.pending = None
        self.gp = None
        self.lindh_model = None  # LindhModel of the 'lindh' prior, once observations exist
        self._lindh_prior = None  # its CalculatorPrior, or 'max' when it has no bond
        self._lindh_replayed = 0  # observations the recentring rule has seen

    def read(self):
        self.initialize()
        state = _read_restart(self.restart)
        numbers = np.asarray(state["numbers"])
        if numbers.shape != self.numbers.shape or (numbers != self.numbers).any():
            raise RestartError(
                f"restart file {self.restart} holds observations of other atoms "
                f"({len(numbers)} atoms, numbers {numbers.tolist()[:8]}...): pass another "
                "restart file name to start afresh; this one was left untouched")
        self.positions_seen = [np.asarray(p, dtype=float) for p in state["positions"]]
        self.energies = [float(e) for e in state["energies"]]
        self.forces = [np.asarray(f, dtype=float) for f in state["forces"]]
        self.trust_radius = float(state["trust_radius"])
        self.predicted_energy = state.get("predicted_energy")
        if state.get("pending") is not None:
            self.pending = np.asarray(state["pending"], dtype=float)
            self.atoms.set_positions(self.pending)
        elif self.positions_seen:
            # stopped between an evaluation and its step: take the step now, so the
            # last configuration is not computed again
            self._move_to_next()

    def todict(self):
        description = super().todict()
        description.update(kappa=self.kappa, trust_radius=self.initial_trust_radius,
                           kernel=self.kernel, recentre=self.recentre,
                           prior=(type(self.prior.calculator).__name__
                                  if isinstance(self.prior, CalculatorPrior) else self.prior))
        return description

    def _gp_prior(self):
        """The GP's prior mean for the observations so far.

        The Lindh model starts around the first observation; the recentring rule is
        replayed over the observations in order, so a restarted run rebuilds the
        model of the uninterrupted run.
        """
        if self.prior != "lindh":
            return self.prior
        while self._lindh_replayed < len(self.energies):
            self._lindh_replayed += 1
            best = int(np.argmin(self.energies[:self._lindh_replayed]))
            if self.lindh_model is None:
                self._set_lindh_model(0)
            elif self.lindh_model.energy_and_forces(self.positions_seen[best])[0] > self.recentre:
                self._set_lindh_model(best)
        return self._lindh_prior

    def _set_lindh_model(self, index):
        self.lindh_model = LindhModel(self.positions_seen[index], self.numbers)
        # no covalent bond in reach: the model would be zero, the constant prior is better
        self._lindh_prior = ("max" if len(self.lindh_model.stretches) == 0
                             else CalculatorPrior(self.lindh_model, self.atoms))

    def _write_restart(self):
        if self.restart is None or self.comm.rank != 0:
            return
        state = {
            "version": RESTART_VERSION,
            "numbers": self.numbers,
            "positions": np.array(self.positions_seen),
            "energies": np.array(self.energies),
            "forces": np.array(self.forces),
            "trust_radius": self.trust_radius,
            "predicted_energy": self.predicted_energy,
            "pending": self.pending,
        }
        temporary = f"{self.restart}.tmp"
        with open(temporary, "w") as fd:
            fd.write(encode(state))
            fd.flush()
            os.fsync(fd.fileno())
        os.replace(temporary, self.restart)

    # ---- observations ---------------------------------------------------------------
    def _record(self):
        """Store the atoms' current energy and forces if they are a new observation."""
        positions = self.atoms.get_positions()
        if self.positions_seen and np.array_equal(positions, self.positions_seen[-1]):
            return
        energy = self.atoms.get_potential_energy()
        forces = self.atoms.get_forces(apply_constraint=False)
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            where = (f"; the {len(self.energies)} earlier observations are kept in "
                     f"{self.restart}" if self.restart else "")
            raise FloatingPointError(
                f"the calculator returned NaN or inf energy or forces at step {self.nsteps}"
                f"{where}. Check the calculator (SCF convergence, geometry) and run again.")
        if self.predicted_energy is not None and self.pending is not None:
            self._update_trust_radius(energy)
        self.positions_seen.append(positions.copy())
        self.energies.append(float(energy))
        self.forces.append(np.array(forces))
        self.pending = None
        self._write_restart()

    def _update_trust_radius(self, energy):
        best = min(self.energies)
        predicted_drop = best - self.predicted_energy
        actual_drop = best - energy
        if actual_drop > 0 and abs(energy - self.predicted_energy) < 0.5 * max(predicted_drop, 0):
            self.trust_radius = min(2.0 * self.trust_radius, self.maxstep)
        elif actual_drop <= 0 or abs(energy - self.predicted_energy) > predicted_drop:
            self.trust_radius = max(0.5 * self.trust_radius, 1e-3)

    # ---- the step -------------------------------------------------------------------
    def step(self):
        self._record()
        self._move_to_next()

    def _move_to_next(self):
        """Propose the next configuration (rank 0), move every rank's atoms there."""
        step = self._propose() + (self.trust_radius,) if self.comm.rank == 0 else None
        # the trust radius too: a step along the forces may have widened it on rank 0
        proposal, predicted, self.trust_radius = broadcast(step, root=0, comm=self.comm)
        self.predicted_energy = predicted
        self.atoms.set_positions(proposal)
        # constraints may have moved the proposal: the configuration to evaluate next
        self.pending = self.atoms.get_positions()
        self._write_restart()

    def fit_model(self):
        """Fit the GP to every observation so far and return it."""
        prior = self._gp_prior()
        if self.gp is None:
            self.gp = EnergyForceGP(prior=prior, **self.gp_options)
        self.gp.prior = prior
        # one GP across steps: it keeps the kernel structure of the configurations seen
        return self.gp.fit(np.array(self.positions_seen), np.array(self.energies),
                           np.array(self.forces))

    def _free_coordinates(self):
        """Boolean mask (3n,) of the coordinates that no FixAtoms constraint holds."""
        free = np.ones((len(self.atoms), 3), dtype=bool)
        for constraint in self.atoms.constraints:
            if isinstance(constraint, FixAtoms):
                free[constraint.get_indices()] = False
        return torch.as_tensor(free.reshape(-1))

    def _propose(self):
        gp = self.fit_model()
        energies = np.array(self.energies)
        best = int(np.argmin(energies))
        centre = torch.as_tensor(self.positions_seen[best])
        latest = torch.as_tensor(self.positions_seen[-1])
        starts = torch.stack([centre, latest]) if best != len(energies) - 1 else centre[None]
        positions, _ = minimize_lcb(gp, starts, centre, self.trust_radius,
                                    self._free_coordinates(), self.kappa)
        positions = positions.numpy()
        if min(np.abs(positions - seen).max() for seen in self.positions_seen) < 1e-6:
            # the model sends us back to a configuration already computed, which
            # would teach it nothing: step along the forces there instead
            positions = self._force_step(best)
        step = positions - self.positions_seen[best]
        longest = np.linalg.norm(step, axis=1).max()
        if longest > self.maxstep:
            positions = self.positions_seen[best] + step * (self.maxstep / longest)
        predicted = float(gp.predict(positions))
        return positions, predicted

    def _force_step(self, index):
        """Positions one trust radius along the forces of observation ``index``."""
        forces = self.forces[index] * self._free_coordinates().numpy().reshape(-1, 3)
        largest = np.linalg.norm(forces, axis=1).max()
        self.trust_radius = max(self.trust_radius, 0.02)
        return self.positions_seen[index] + forces * (self.trust_radius / max(largest, 1e-12))

    def log(self, gradient):
        if self.logfile is None:
            return
        fmax = self.optimizable.gradient_norm(gradient)
        energy = self.optimizable.get_value()
        now = time.localtime()
        name = type(self).__name__
        if self.nsteps == 0:
            self.logfile.write(f"{' ' * len(name)}  {'Step':>4} {'Time':>8} {'Energy':>15}  "
                               f"{'fmax':>12} {'Predicted':>15}\n")
        predicted = ("" if self.predicted_energy is None or self.nsteps == 0
                     else f"{self.predicted_energy:15.6f}")
        self.logfile.write(f"{name}:  {self.nsteps:3d} {now[3]:02d}:{now[4]:02d}:{now[5]:02d} "
                           f"{energy:15.6f} {fmax:15.6f} {predicted}\n")


def _check_atoms(atoms):
    if atoms.calc is None:
        raise ValueError("BOOptimizer needs a calculator: attach one first, "
                         "e.g. atoms.calc = calculators.get_calculator('gfn2')")
    if len(atoms) < 2:
        raise ValueError("a single atom has no geometry to optimize: its energy does not "
                         "depend on its position")


def _choose_prior(atoms, prior):
    if hasattr(prior, "get_potential_energy") or hasattr(prior, "calculate"):
        return CalculatorPrior(prior, atoms)
    periodic = bool(np.any(atoms.pbc))
    if prior is None:
        return "max" if periodic else "lindh"
    if prior == "lindh" and periodic:
        raise ValueError("the Lindh model prior knows the bonds of a molecule, not those "
                         "across a periodic cell: use prior='max' (the default for "
                         "periodic atoms) or a calculator")
    if prior not in MODEL_PRIORS and not isinstance(prior, (int, float)):
        raise ValueError("prior must be an ASE calculator, 'lindh', 'max', 'mean' or a "
                         f"number, got {prior!r}")
    return prior


def _choose_kernel(atoms, kernel):
    periodic = bool(np.any(atoms.pbc))
    if kernel is None:
        return "cartesian" if periodic else "svd"
    if kernel == "svd" and periodic:
        raise ValueError("the SVD kernel is invariant to rotations, which a periodic cell is "
                         "not: use kernel='cartesian' (the default for periodic atoms) or "
                         "set atoms.pbc = False for a molecule")
    if kernel not in ("svd", "cartesian"):
        raise ValueError(f"kernel must be 'svd' or 'cartesian', got {kernel!r}")
    return kernel


def _read_restart(path):
    try:
        with open(path) as fd:
            state = decode(fd.read())
        missing = {"numbers", "positions", "energies", "forces", "trust_radius"} - set(state)
        if missing:
            raise KeyError(f"missing {sorted(missing)}")
        if state.get("version") != RESTART_VERSION:
            raise KeyError(f"version {state.get('version')} is not {RESTART_VERSION}")
        m = len(state["energies"])
        if len(state["positions"]) != m or len(state["forces"]) != m:
            raise KeyError("positions, energies and forces differ in length")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise RestartError(
            f"restart file {path} cannot be read ({error}). It was left untouched: move it "
            "away (or pass another restart name) to start afresh") from error
    return state
