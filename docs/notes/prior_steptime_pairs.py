"""Time per step outside the GFN2-xTB target under a GFN1-xTB prior: the run's wall
time less the target's, over its steps, printed as one JSON line.

Run from two working trees side by side (PYTHONPATH naming each), one thread:

    OMP_NUM_THREADS=1 PYTHONPATH=. python docs/notes/prior_steptime_pairs.py \
        asebo/data/druglike3/metoprolol.xyz
"""

import json
import sys
import time

from ase.calculators.calculator import Calculator, all_changes
from ase.io import read

from asebo import BOOptimizer
from calculators import get_calculator


class Timed(Calculator):
    """``inner``'s energies and forces, with the wall time and count of its calls."""

    implemented_properties = ["energy", "forces"]

    def __init__(self, inner):
        super().__init__()
        self.inner, self.wall, self.calls = inner, 0.0, 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        began = time.perf_counter()
        work = self.atoms.copy()
        work.calc = self.inner
        self.results = {"energy": work.get_potential_energy(), "forces": work.get_forces()}
        self.wall += time.perf_counter() - began
        self.calls += 1


path = sys.argv[1]
atoms = read(path)
target = Timed(get_calculator("gfn2"))
atoms.calc = target
relax = BOOptimizer(atoms, prior=get_calculator("gfn1"), logfile=None)
began = time.perf_counter()
relax.run(fmax=0.05, steps=100)
total = time.perf_counter() - began
row = {
    "molecule": path.split("/")[-1][:-4],
    "atoms": len(atoms),
    "calls": target.calls,
    "s_per_step_outside": (total - target.wall) / max(target.calls - 1, 1),
}
print(json.dumps(row))
