"""Pyridine under GPAW: are BOOptimizer's and L-BFGS's endpoints one shape?

From each start of ``asebo bench users`` (``MaterialSystem.start``), relaxes pyridine
with BOOptimizer's default and with L-BFGS to fmax 0.05 eV/Å, then relaxes each
endpoint on with L-BFGS to fmax 0.005 eV/Å. Prints, per start, each endpoint's
energy, its tightened energy and the calls that took, and between the two tightened
ends the energy apart, the largest atomic move (rigid motions included) and the
largest change of an interatomic distance (the shape)::

    OMP_NUM_THREADS=1 python docs/notes/pyridine_grid.py   # about 20 minutes
"""

import numpy as np
from ase.optimize import LBFGS

from asebo import BOOptimizer
from asebo.benchmarks._materials import system_calculator
from asebo.benchmarks.users import MOLECULE_GPAW, molecule_systems
from calculators import CountingCalculator


def relaxed(atoms, optimizer, system):
    """``atoms`` relaxed by ``optimizer`` to fmax 0.05, then by L-BFGS to 0.005: the
    two energies, the calls of each and the tightened atoms."""
    atoms.calc = CountingCalculator(system_calculator(MOLECULE_GPAW, system))
    optimizer(atoms, logfile=None).run(fmax=0.05, steps=300)
    energy, calls = atoms.get_potential_energy(), atoms.calc.ncalls
    LBFGS(atoms, logfile=None).run(fmax=0.005, steps=300)
    return energy, atoms.get_potential_energy(), calls, atoms.calc.ncalls - calls, atoms


def main():
    system = molecule_systems(["pyridine"])[0]
    for start in (0, 1):
        ends = {}
        for label, optimizer in (("default", BOOptimizer), ("L-BFGS", LBFGS)):
            energy, tight, calls, more, atoms = relaxed(system.start(start), optimizer, system)
            ends[label] = atoms
            print(
                f"start {start + 1} {label}: {calls} calls, {energy:.4f} eV; "
                f"tightened {tight:.4f} eV in {more} more calls"
            )
        first, second = ends.values()
        apart = abs(first.get_potential_energy() - second.get_potential_energy())
        moved = np.linalg.norm(first.positions - second.positions, axis=1).max()
        shape = np.abs(first.get_all_distances() - second.get_all_distances()).max()
        print(
            f"start {start + 1} tightened ends: {1000 * apart:.1f} meV apart, largest move "
            f"{moved:.2f} Å, largest distance change {shape:.4f} Å"
        )


if __name__ == "__main__":
    main()
