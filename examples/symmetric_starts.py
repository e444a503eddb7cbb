"""Symmetric starts: rotor saddles and symmetric minima, side by side.

Three groups of GFN2-xTB starts from ASE's G2 geometries, each relaxed to fmax 0.05
eV/Å by ``BOOptimizer`` (default), ``BOOptimizer`` with
``SpecialCases(symmetry_probe=0.1)``, ``BOOptimizer`` with a GFN1-xTB prior, L-BFGS
and Sella (internal coordinates, where installed):

- **symmetric rotor saddles**: ethane, methylsilane and disilane with one group turned
  60 degrees about the bond, exactly eclipsed (D3h, C3v, D3h);
- **symmetric methyl rotor saddles**: eleven molecules with a methyl group turned half
  a turn about its own axis (from the carbon to its hydrogens' centroid), which lies
  in the mirror plane: eclipsed, with the point group kept;
- **near-symmetric rotor saddles**: eight molecules with a methyl group turned 60
  degrees about its bond; the hydrogens are not symmetric about that bond, so the
  start keeps no symmetry, but the forces along the torsion start far below fmax;
- **symmetric minima**: eight G2 molecules at their symmetric geometries.

The starts are built by :mod:`asebo.benchmarks._symmetric_starts`. Each cell gives the
force calls, the energy above the lowest of all the endpoints and of an L-BFGS run from
the start rattled by 0.05 Å (eV), and ``saddle`` where the target's finite-difference
Hessian at the endpoint has a mode above 50i cm⁻¹. About five minutes on one core.
"""

import argparse

from ase.build import molecule
from ase.optimize import LBFGS

from asebo import BOOptimizer
from asebo.benchmarks._endpoint_audit import imaginary_modes
from asebo.benchmarks._symmetric_starts import (
    MINIMA,
    NEAR_SYMMETRIC_SADDLES,
    SYMMETRIC_METHYL_ROTORS,
    SYMMETRIC_SADDLES,
    methyl_turned,
    methyl_turned_about_its_axis,
    symmetric_saddle,
)
from asebo.optimize.settings import SpecialCases
from calculators import CountingCalculator, get_calculator


def optimizers():
    """The optimizers compared, by label: each makes one from atoms with a calculator."""
    makers = {
        "bo": lambda atoms: BOOptimizer(atoms, logfile=None),
        "bo, probe": lambda atoms: BOOptimizer(
            atoms, logfile=None, special_cases=SpecialCases(symmetry_probe=0.1)
        ),
        "bo, GFN1 prior": lambda atoms: BOOptimizer(
            atoms, logfile=None, prior=get_calculator("gfn1")
        ),
        "lbfgs": lambda atoms: LBFGS(atoms, logfile=None),
    }
    try:
        from sella import Sella

        makers["sella"] = lambda atoms: Sella(atoms, internal=True, logfile=None)
    except ImportError:
        print("sella is not installed (pip install 'asebo[sella]'): left out")
    return makers


def relax_all(start, makers):
    """Calls, energy and imaginary modes of each optimizer's endpoint, and the lowest
    energy found (an L-BFGS run from the start rattled by 0.05 Å included)."""
    results = {}
    for name, make in makers.items():
        atoms = start.copy()
        atoms.calc = CountingCalculator(get_calculator("gfn2"))
        make(atoms).run(fmax=0.05, steps=200)
        imaginary = imaginary_modes(atoms, get_calculator("gfn2"))
        results[name] = (atoms.calc.ncalls, atoms.get_potential_energy(), bool(imaginary))
    rattled = start.copy()
    rattled.rattle(0.05, seed=1)
    rattled.calc = get_calculator("gfn2")
    LBFGS(rattled, logfile=None).run(fmax=0.005, steps=500)
    lowest = min([rattled.get_potential_energy()] + [e for _, e, _ in results.values()])
    return results, lowest


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    makers = optimizers()
    groups = {
        "symmetric rotor saddles": {
            name: symmetric_saddle(*made) for name, made in SYMMETRIC_SADDLES.items()
        },
        "symmetric methyl rotor saddles": {
            name: methyl_turned_about_its_axis(name) for name in SYMMETRIC_METHYL_ROTORS
        },
        "near-symmetric rotor saddles": {
            name: methyl_turned(name) for name in NEAR_SYMMETRIC_SADDLES
        },
        "symmetric minima": {name: molecule(name) for name in MINIMA},
    }
    print("| start | " + " | ".join(makers) + " |")
    print("|---" * (len(makers) + 1) + "|")
    for group, starts in groups.items():
        calls, saddles = dict.fromkeys(makers, 0), dict.fromkeys(makers, 0)
        for name, start in starts.items():
            results, lowest = relax_all(start, makers)
            cells = []
            for label, (count, energy, saddle) in results.items():
                calls[label] += count
                saddles[label] += saddle
                cells.append(f"{count}, {energy - lowest:+.3f}" + (", saddle" if saddle else ""))
            print(f"| {name} | " + " | ".join(cells) + " |")
        totals = [f"{calls[label]} calls, saddles: {saddles[label]}" for label in makers]
        print(f"| **{group}** | " + " | ".join(totals) + " |")


if __name__ == "__main__":
    main()
