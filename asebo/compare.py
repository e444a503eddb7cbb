"""One relaxation with any of the optimizers users compare, counted and timed.

:func:`relax` is the unit that benchmarks and comparison campaigns repeat: it runs
one optimizer from one start with one calculator and reports the force calls, the
energy after every call, whether it converged, and where the time went.
"""

import time

import numpy as np
from ase.optimize import BFGS, FIRE, LBFGS, GPMin

from asebo.optimize import MODEL_PRIORS, BOOptimizer
from calculators import CountingCalculator, get_calculator


def _sella(atoms, **kwargs):
    try:
        from sella import Sella
    except ImportError as error:
        raise ImportError("Sella is not installed: pip install 'asebo[sella]'") from error
    return Sella(atoms, internal=True, order=0, **kwargs)


OPTIMIZERS = {
    "bo": BOOptimizer,
    "bfgs": BFGS,
    "lbfgs": LBFGS,
    "fire": FIRE,
    "gpmin": GPMin,
    "sella": _sella,
}


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
        Prior mean of ``bo``: a name of :data:`asebo.optimize.MODEL_PRIORS`, or the preset name of a
        cheap calculator (Δ-learning). By default ``bo``'s own default.
    options : dict, optional
        Extra keyword arguments of the optimizer.

    Returns
    -------
    dict
        ``calls``, ``converged``, ``energy``, ``fmax``, ``energies`` (after every
        call), ``positions`` (final), ``seconds``, and ``seconds_outside`` and
        ``cpu_seconds_outside`` (wall and processor time not spent in the
        calculator).
    """
    work = atoms.copy()
    inner = get_calculator(calc) if isinstance(calc, str) else calc
    counter = CountingCalculator(inner)
    work.calc = counter
    options = dict(options or {})
    if prior is not None:
        if optimizer != "bo":
            raise ValueError("only the 'bo' optimizer takes a calculator prior")
        if prior in MODEL_PRIORS:
            options["prior"] = prior
        else:
            options["prior"] = get_calculator(prior) if isinstance(prior, str) else prior
    energies = []
    opt = OPTIMIZERS[optimizer](work, logfile=None, **options)
    opt.attach(lambda: energies.append(float(work.get_potential_energy())))
    start, start_cpu = time.perf_counter(), time.process_time()
    converged = bool(opt.run(fmax=fmax, steps=steps))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    forces = work.get_forces()
    return {
        "calls": counter.ncalls,
        "converged": converged,
        "energy": float(work.get_potential_energy()),
        "fmax": float(np.linalg.norm(forces, axis=1).max()),
        "energies": energies,
        "positions": work.get_positions(),
        "seconds": seconds,
        "seconds_outside": seconds - counter.wall_time,
        "cpu_seconds_outside": cpu_seconds - counter.cpu_time,
        "steps": opt.nsteps,
    }
