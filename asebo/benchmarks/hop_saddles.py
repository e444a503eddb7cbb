"""Saddle points of surface and bulk hops from a guess: BOSaddle, Sella and ASE's dimer.

Six hops with EMT, each endpoint relaxed first (BFGS, fmax 0.01 eV/Å): Au on Al(100)
from one hollow site to the next, a Pt adatom on Pt(111) from the fcc to the hcp
hollow, a Pt adatom on Pt(100) and an Au adatom on Au(111) likewise, and a vacancy hop
to a nearest site in a 2x2x2 cubic Cu and Al cell (``--set emt``); ``--set held-out``:
Ag and Ni adatoms on their own (100) surfaces, Au on Pt(100), Cu on Cu(111), and
vacancy hops in Ni and Pd, none of which a choice of BOSaddle's was made on;
``--set gpaw``: an Al adatom on Al(100) with GPAW in LCAO mode, the hop of ``asebo bench
neb --set gpaw`` (:func:`asebo.benchmarks.neb.al_on_al100`, about 8 s a call). The
guess is the middle of the IDPP
band between the endpoints (ASE's ``interpolate('idpp')``, an odd number of images):
what a user who has the two minima would start from. From the same guess, to
``--fmax``:

- :class:`asebo.saddle.BOSaddle`, its defaults (a periodic system's: the periodic
  representation and pair-spring prior of :class:`asebo.BOOptimizer`);
- Sella in Cartesian coordinates (``internal=False, order=1``, E. D. Hermes,
  K. Sargsyan, H. N. Najm and J. Zádor, J. Chem. Theory Comput. 18, 6974 (2022));
- ASE's dimer method (``ase.mep.dimer``, G. Henkelman and H. Jónsson, J. Chem. Phys.
  111, 7010 (1999); its translation ``MinModeTranslate``), its first mode along the hop
  (the final endpoint less the initial one, free atoms only), as ASE's tutorial sets it.

Each row gives the calls of every search (``*`` not converged), the negative
curvatures at its end by central differences of the forces of the free atoms (eV/Å²,
the translations of a cell with no atom held left out; below :data:`FLAT` is none;
those calls not counted) and its energy above the initial minimum (meV). A search is
at the hop's saddle point where it ends at a first-order saddle point within
:data:`SAME` eV of the lowest first-order endpoint of the three. The summary gives the
calls in all and each method's count of first-order endpoints and of the hop's saddle.
"""

import time

import numpy as np
from ase.build import add_adsorbate, bulk, fcc100, fcc111
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.optimize import BFGS

from asebo.benchmarks._options import positive_float, positive_int
from asebo.benchmarks.neb import (
    al_on_al100,
    au_on_al100,
    cu_vacancy,
    idpp_band,
    lcao_gpaw,
    pt_on_pt111,
)

OPTIMIZERS = ("BOSaddle", "Sella", "dimer")
SAME = 0.01  # eV: first-order endpoints this close are the same saddle point
FLAT = -0.01  # eV/Å²: a curvature above is no negative one


def _relaxed(atoms):
    atoms.calc = EMT()
    BFGS(atoms, logfile=None).run(fmax=0.01, steps=1000)
    return atoms


def adatom_hop(metal, surface, adatom, sites, height):
    """An adatom of element ``adatom`` on ``metal``'s ``surface`` (100 or 111), 3x3 atoms
    in 3 layers, the lowest held, between the two hollow ``sites``: (initial, final)."""
    ends = []
    for site in sites:
        build = fcc100 if surface == 100 else fcc111
        slab = build(metal, size=(3, 3, 3), vacuum=6.0)
        add_adsorbate(slab, adatom, height, site)
        slab.set_constraint(FixAtoms(mask=slab.get_tags() == 3))
        ends.append(slab)
    if sites[0] == sites[1]:  # the next hollow of the same kind, one spacing along x
        ends[1].positions[-1, 0] += ends[1].cell[0, 0] / 3
    return tuple(_relaxed(end) for end in ends)


def vacancy_hop(metal):
    """A vacancy hop to a nearest site in a 2x2x2 cubic cell of ``metal``: (initial,
    final)."""
    crystal = bulk(metal, cubic=True).repeat((2, 2, 2))
    vacancy = crystal.positions[0].copy()
    del crystal[0]
    hopping = int(np.argmin(np.linalg.norm(crystal.positions - vacancy, axis=1)))
    final = crystal.copy()
    final.positions[hopping] = vacancy
    return _relaxed(crystal), _relaxed(final)


HOPS = {
    "au_al100": lambda: au_on_al100()[:2],
    "pt_pt111": lambda: pt_on_pt111()[:2],
    "pt_pt100": lambda: adatom_hop("Pt", 100, "Pt", ("hollow", "hollow"), 1.8),
    "au_au111": lambda: adatom_hop("Au", 111, "Au", ("fcc", "hcp"), 2.0),
    "cu_vacancy": lambda: cu_vacancy()[:2],
    "al_vacancy": lambda: vacancy_hop("Al"),
}
"""The hops of ``--set emt``: name, then the function that builds the relaxed
(initial, final)."""

HELD_OUT = {
    "ag_ag100": lambda: adatom_hop("Ag", 100, "Ag", ("hollow", "hollow"), 1.9),
    "cu_cu111": lambda: adatom_hop("Cu", 111, "Cu", ("fcc", "hcp"), 1.8),
    "au_pt100": lambda: adatom_hop("Pt", 100, "Au", ("hollow", "hollow"), 1.9),
    "ni_ni100": lambda: adatom_hop("Ni", 100, "Ni", ("hollow", "hollow"), 1.6),
    "ni_vacancy": lambda: vacancy_hop("Ni"),
    "pd_vacancy": lambda: vacancy_hop("Pd"),
}
"""The hops of ``--set held-out``: other metals and sites, for checks of choices made
on ``--set emt``."""

GPAW_HOPS = {"al_al100_gpaw": lambda: al_on_al100()[:2]}
"""The hop of ``--set gpaw``: an Al adatom on Al(100) with GPAW in LCAO mode
(:func:`asebo.benchmarks.neb.al_on_al100`, the slab held)."""

SETS = {"emt": HOPS, "held-out": HELD_OUT, "gpaw": GPAW_HOPS}
EVERY_HOP = {**HOPS, **HELD_OUT, **GPAW_HOPS}


def hop_guess(initial, final):
    """The middle image of the 5-image IDPP band between the endpoints, with their
    constraints."""
    guess = initial.copy()
    guess.positions = idpp_band(initial, final, 3)[2]
    return guess


def free_curvatures(atoms, calculator):
    """The curvatures (k,) in eV/Å², ascending, of ``calculator``'s energy at ``atoms``
    along the coordinates no ``FixAtoms`` holds, by central differences of the forces
    (:func:`asebo.barrier.modes.calculator_hessian`); with no atom held, the
    translations are left out."""
    from asebo.barrier.modes import calculator_hessian
    from asebo.optimize.model_hessian import internal_basis
    from asebo.optimize.subspace import free_atoms

    free = free_atoms(atoms)  # (n, 3)
    hessian = calculator_hessian(atoms, calculator, free)  # (3n, 3n)
    basis = internal_basis(atoms.positions, free, rotations=False)  # (3n, k)
    return np.linalg.eigvalsh(basis.T @ hessian @ basis)


def direction_of_hop(initial, final):
    """The unit displacement (n, 3) from ``initial`` to ``final`` of the free atoms."""
    from asebo.optimize.subspace import free_atoms

    step = (final.positions - initial.positions) * free_atoms(initial)
    return step / np.linalg.norm(step)


def search(task):
    """One search of ``optimizer`` on hop ``name``: a dict of the result."""
    name, optimizer, fmax, steps = task
    from calculators import CountingCalculator

    initial, final = EVERY_HOP[name]()
    make = lcao_gpaw if name in GPAW_HOPS else EMT
    atoms = hop_guess(initial, final)
    counter = CountingCalculator(make())
    atoms.calc = counter
    start = time.perf_counter()
    try:
        converged = _run(optimizer, atoms, initial, final, fmax, steps)
        energy = atoms.get_potential_energy()
    except Exception as error:  # a search that fails: a row that says so
        return {"calls": counter.ncalls, "error": f"{type(error).__name__}: {str(error)[:80]}"}
    seconds = time.perf_counter() - start - counter.wall_time
    negative = free_curvatures(atoms, make())
    return {
        "calls": counter.ncalls,
        "converged": bool(converged),
        "above": float(energy - initial.get_potential_energy()),
        "negative": [float(c) for c in negative if c < FLAT],
        "seconds": seconds,
    }


def _run(optimizer, atoms, initial, final, fmax, steps):
    if optimizer == "BOSaddle":
        from asebo.saddle import BOSaddle

        return BOSaddle(atoms, logfile=None).run(fmax=fmax, steps=steps)
    if optimizer == "Sella":
        from sella import Sella

        return Sella(atoms, internal=False, order=1, logfile=None).run(fmax=fmax, steps=steps)
    from ase.mep.dimer import DimerControl, MinModeAtoms, MinModeTranslate

    control = DimerControl(
        initial_eigenmode_method="displacement", displacement_method="vector", logfile=None
    )
    dimer = MinModeAtoms(atoms, control, eigenmodes=[direction_of_hop(initial, final)])
    with MinModeTranslate(dimer, logfile=None) as translate:
        return translate.run(fmax=fmax, steps=steps)


def _first_order(result):
    return "error" not in result and len(result["negative"]) == 1


def _cell(result):
    if "error" in result:
        return f"{result['calls']}, {result['error']}"
    star = "" if result["converged"] else "*"
    negative = ", ".join(f"{c:.2f}" for c in result["negative"]) or "-"
    return f"{result['calls']}{star} | {negative} | {1000 * result['above']:.0f}"


def add_arguments(parser):
    parser.add_argument("--set", choices=sorted(SETS), default="emt", help="default: emt")
    parser.add_argument(
        "--hops",
        nargs="+",
        choices=sorted(EVERY_HOP),
        default=None,
        help="default: every hop of --set",
    )
    parser.add_argument(
        "--optimizers",
        nargs="+",
        choices=OPTIMIZERS,
        default=list(OPTIMIZERS),
        help="default: all three",
    )
    parser.add_argument("--fmax", type=positive_float, default=0.05, help="eV/Å")
    parser.add_argument("--steps", type=positive_int, default=500)


def run(args):
    optimizers = [o for o in OPTIMIZERS if o in args.optimizers]
    args.hops = args.hops or list(SETS[args.set])
    results = {}
    for name in args.hops:
        for optimizer in optimizers:
            results[name, optimizer] = result = search((name, optimizer, args.fmax, args.steps))
            print(f"{name} {optimizer}: {_cell(result)}", flush=True)
    print()
    header = " | ".join(f"{o} calls | {o} negative (eV/Å²) | {o} above (meV)" for o in optimizers)
    print(f"| hop | {header} |")
    print("|---|" + "---|---|---|" * len(optimizers))
    same = dict.fromkeys(optimizers, 0)
    for name in args.hops:
        row = [results[name, o] for o in optimizers]
        print(f"| {name} | " + " | ".join(_cell(r) for r in row) + " |")
        saddles = [r["above"] for r in row if _first_order(r)]
        for optimizer, result in zip(optimizers, row):
            if _first_order(result) and result["above"] < min(saddles) + SAME:
                same[optimizer] += 1
    print()
    for optimizer in optimizers:
        done = [results[n, optimizer] for n in args.hops]
        seconds = [r["seconds"] / max(r["calls"], 1) for r in done if "seconds" in r]
        print(
            f"{optimizer}: {sum(r['calls'] for r in done)} calls in all, "
            f"{sum(r.get('converged', False) for r in done)} of {len(done)} converged, "
            f"{sum(_first_order(r) for r in done)} at a first-order saddle point, "
            f"{same[optimizer]} at the hop's (the lowest first-order endpoint, within "
            f"{SAME * 1000:.0f} meV), {np.mean(seconds):.2f} s per call outside the calculator"
        )
