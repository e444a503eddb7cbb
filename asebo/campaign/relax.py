"""One relaxation with any of the optimizers users compare, counted and timed.

:func:`relax` is the unit that benchmarks and comparison campaigns repeat: it runs
one optimizer from one start with one calculator and reports the force calls, the
energy of every call, whether it converged, and where the time went. With
``cell_filter`` it relaxes the positions and the cell together through one of ASE's
cell filters (:data:`CELL_FILTERS`).
"""

import time

import numpy as np
from ase.calculators.calculator import all_changes
from ase.filters import ExpCellFilter, FrechetCellFilter, StrainFilter, UnitCellFilter
from ase.optimize import BFGS, FIRE, LBFGS, GPMin

from asebo.extras import missing_optimizer_package
from asebo.model.priors import resolve_prior
from calculators import CountingCalculator, get_calculator


def _bo(atoms, **kwargs):
    from asebo.optimize.optimizer import BOOptimizer

    return BOOptimizer(atoms, **kwargs)


def _sella(atoms, **kwargs):
    """Sella in internal coordinates for a molecule, in Cartesian ones for a periodic cell.

    Sella's internal coordinates do not cross cell boundaries, so periodic ``atoms`` are
    optimized in Cartesian coordinates (``internal=False``).
    """
    missing = missing_optimizer_package("sella")
    if missing:
        raise ImportError(missing)
    from sella import Sella

    periodic = bool(np.any(atoms.pbc))
    return Sella(atoms, internal=not periodic, order=0, **kwargs)


def _preconlbfgs(atoms, **kwargs):
    """ASE's preconditioned L-BFGS with the ``Exp`` preconditioner.

    References
    ----------
    D. Packwood, J. Kermode, L. Mones, N. Bernstein, J. Woolley, N. Gould, C. Ortner,
    G. Csányi, "A universal preconditioner for simulating condensed phase materials",
    J. Chem. Phys. 144, 164109 (2016).
    """
    from ase.optimize.precon import Exp, PreconLBFGS

    return PreconLBFGS(atoms, precon=Exp(), **kwargs)


def _geometric(atoms, **kwargs):
    from asebo.campaign.geometric_optimizer import GeomeTRIC

    return GeomeTRIC(atoms, **kwargs)


OPTIMIZERS = {
    "bo": _bo,
    "bfgs": BFGS,
    "lbfgs": LBFGS,
    "fire": FIRE,
    "gpmin": GPMin,
    "preconlbfgs": _preconlbfgs,
    "sella": _sella,
    "geometric": _geometric,
}
"""Optimizers by name: :class:`asebo.BOOptimizer`, ASE's BFGS, L-BFGS, FIRE, GPMin and
PreconLBFGS with the ``Exp`` preconditioner, Sella in internal coordinates (Cartesian
ones for periodic cells; ``pip install 'asebo[sella]'``) and geomeTRIC in TRIC
coordinates (:class:`asebo.campaign.geometric_optimizer.GeomeTRIC`,
``pip install 'asebo[geometric]'``). Its keys are
:data:`asebo.campaign.optimizer_names.OPTIMIZER_NAMES`, which the command line reads."""

CELL_FILTERS = {
    "frechet": FrechetCellFilter,
    "unitcell": UnitCellFilter,
    "exp": ExpCellFilter,
    "strain": StrainFilter,
}
"""ASE's cell filters by name, for :func:`relax`'s ``cell_filter``. The optimizer sees the
filter's generalized positions (atoms and cell deformation) and forces (with the
virial). Sella takes no filter: it relaxes the cell itself (``optimize_cell=True``)."""


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
        calls = self.ncalls
        super().calculate(atoms, properties, system_changes)
        if self.ncalls > calls:  # not a stress asked for at the same configuration
            self.energies.append(float(self.results["energy"]))


def _optimizer(name, work, cell_filter, options):
    """The optimizer ``name`` on ``work``, through the cell filter when one is named."""
    optimizable = work if cell_filter is None else CELL_FILTERS[cell_filter](work)
    if name == "sella" and cell_filter is not None:
        return _sella(work, optimize_cell=True, logfile=None, **options), optimizable
    return OPTIMIZERS[name](optimizable, logfile=None, **options), optimizable


def relax(
    atoms,
    optimizer,
    calc="gfn2",
    fmax=0.05,
    steps=200,
    prior=None,
    options=None,
    cell_filter=None,
):
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
    cell_filter : str, optional
        A key of :data:`CELL_FILTERS`: relax the cell too, through that filter. The
        calculator must give the stress. ``fmax`` then bounds the filter's forces, whose
        cell part is the virial divided by the filter's cell factor (the number of atoms
        by default), so the stress converges to ``fmax`` over the volume per atom.

    Returns
    -------
    dict
        ``calls``, ``converged``, ``energy``, ``fmax`` (of the filter's forces with a
        filter), ``stress`` (largest stress component in eV/Å³, only with a filter),
        ``cell`` (final, only with a filter), ``energies`` (of every
        calculator call, in order: an optimizer such as GPMin calls more than once
        per step), ``positions`` (final), ``steps``, ``seconds``, and
        ``seconds_outside`` and ``cpu_seconds_outside`` (wall and processor time not
        spent in the calculator).

    Raises
    ------
    ValueError
        For an unknown optimizer or cell filter, or a prior given to another optimizer
        than ``bo``.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}: choose among {', '.join(OPTIMIZERS)}")
    if cell_filter is not None and cell_filter not in CELL_FILTERS:
        raise ValueError(
            f"unknown cell filter {cell_filter!r}: choose among {', '.join(CELL_FILTERS)}"
        )
    options = dict(options or {})
    if prior is not None:
        if optimizer != "bo":
            raise ValueError("only the 'bo' optimizer takes a prior")
        options["prior"] = resolve_prior(prior)
    work = atoms.copy()
    counter = EnergyRecorder(get_calculator(calc) if isinstance(calc, str) else calc)
    work.calc = counter
    opt, optimizable = _optimizer(optimizer, work, cell_filter, options)
    start, start_cpu = time.perf_counter(), time.process_time()
    converged = bool(opt.run(fmax=fmax, steps=steps))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    forces = optimizable.get_forces()  # (n, 3), or (n + 3, 3) through a filter
    result = {
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
    if cell_filter is not None:
        result["stress"] = float(np.abs(work.get_stress()).max())
        result["cell"] = work.cell.array.copy()
    return result
