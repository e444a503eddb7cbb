"""One relaxation with any of the optimizers users compare, counted and timed.

:func:`relax` is the unit that benchmarks and comparison campaigns repeat: it runs
one optimizer from one start with one calculator and reports the force calls, the
energy of every call, whether it converged, and where the time went.
"""

import time

import numpy as np
from ase.calculators.calculator import all_changes
from ase.optimize import BFGS, FIRE, LBFGS, GPMin

from asebo.extras import missing_optimizer_package
from asebo.model.priors import resolve_prior
from calculators import CountingCalculator, get_calculator


def _bo(atoms, **kwargs):
    from asebo.optimize.optimizer import BOOptimizer

    return BOOptimizer(atoms, **kwargs)


def _sella(atoms, **kwargs):
    missing = missing_optimizer_package("sella")
    if missing:
        raise ImportError(missing)
    from sella import Sella

    return Sella(atoms, internal=True, order=0, **kwargs)


def _geometric(atoms, **kwargs):
    from asebo.campaign.geometric_optimizer import GeomeTRIC

    return GeomeTRIC(atoms, **kwargs)


OPTIMIZERS = {
    "bo": _bo,
    "bfgs": BFGS,
    "lbfgs": LBFGS,
    "fire": FIRE,
    "gpmin": GPMin,
    "sella": _sella,
    "geometric": _geometric,
}
"""Optimizers by name: :class:`asebo.BOOptimizer`, ASE's BFGS, L-BFGS, FIRE and GPMin,
Sella in internal coordinates (``pip install 'asebo[sella]'``) and geomeTRIC in TRIC
coordinates (:class:`asebo.campaign.geometric_optimizer.GeomeTRIC`,
``pip install 'asebo[geometric]'``)."""


class EnergyRecorder(CountingCalculator):
    """A :class:`calculators.CountingCalculator` that keeps the energy of every call.

    Attributes
    ----------
    energies : list of float
        Energy of every call, eV, in the order of the calls.
    """

    def __init__(self, calc):
        super().__init__(calc)
        self.energies = []

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.energies.append(float(self.results["energy"]))


def relax(atoms, optimizer, calc="gfn2", fmax=0.05, steps=200, prior=None, options=None):
    """Relax a copy of ``atoms`` and count the calculator calls.

    Parameters
    ----------
    atoms : ase.Atoms
        The start; not modified.
    optimizer : str
        A key of :data:`OPTIMIZERS`.
    calc : str or ase calculator
        A preset name of :func:`calculators.get_calculator` or a calculator.
    fmax : float
        Convergence threshold on the largest force, eV/Å.
    steps : int
        Largest number of optimizer steps.
    prior : str, optional
        Prior mean of ``bo``: a name of :data:`asebo.model.priors.MODEL_PRIORS`, or the preset
        name of a cheap calculator (Δ-learning). By default ``bo``'s own default.
    options : dict, optional
        Extra keyword arguments of the optimizer.

    Returns
    -------
    dict
        ``calls``, ``converged``, ``energy``, ``fmax``, ``energies`` (of every
        calculator call, in order: an optimizer such as GPMin calls more than once
        per step), ``positions`` (final), ``steps``, ``seconds``, and
        ``seconds_outside`` and ``cpu_seconds_outside`` (wall and processor time not
        spent in the calculator).

    Raises
    ------
    ValueError
        For an unknown optimizer, or a prior given to another optimizer than ``bo``.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}: choose among {', '.join(OPTIMIZERS)}")
    options = dict(options or {})
    if prior is not None:
        if optimizer != "bo":
            raise ValueError("only the 'bo' optimizer takes a prior")
        options["prior"] = resolve_prior(prior)
    work = atoms.copy()
    counter = EnergyRecorder(get_calculator(calc) if isinstance(calc, str) else calc)
    work.calc = counter
    opt = OPTIMIZERS[optimizer](work, logfile=None, **options)
    start, start_cpu = time.perf_counter(), time.process_time()
    converged = bool(opt.run(fmax=fmax, steps=steps))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    forces = work.get_forces()  # (n, 3)
    return {
        "calls": counter.ncalls,
        "converged": converged,
        "energy": float(work.get_potential_energy()),
        "fmax": float(np.linalg.norm(forces, axis=1).max()),
        "energies": counter.energies,
        "positions": work.get_positions(),
        "seconds": seconds,
        "seconds_outside": seconds - counter.wall_time,
        "cpu_seconds_outside": cpu_seconds - counter.cpu_time,
        "steps": opt.nsteps,
    }
