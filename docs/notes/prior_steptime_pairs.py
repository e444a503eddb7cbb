"""Time per step outside the GFN2-xTB target under a GFN1-xTB prior: the run's wall
time less the target's, over its steps, printed as one JSON line.

Run from two working trees side by side (PYTHONPATH naming each), one thread:

    OMP_NUM_THREADS=1 PYTHONPATH=. python docs/notes/prior_steptime_pairs.py \
        asebo/data/druglike3/metoprolol.xyz
"""

import json
import sys
import time

from ase.io import read

from asebo import BOOptimizer
from calculators import CountingCalculator, get_calculator

path = sys.argv[1]
atoms = read(path)
target = CountingCalculator(get_calculator("gfn2"))
atoms.calc = target
relax = BOOptimizer(atoms, prior=get_calculator("gfn1"), logfile=None)
began = time.perf_counter()
relax.run(fmax=0.05, steps=100)
total = time.perf_counter() - began
row = {
    "molecule": path.split("/")[-1][:-4],
    "atoms": len(atoms),
    "calls": target.ncalls,
    "s_per_step_outside": (total - target.wall_time) / max(target.ncalls - 1, 1),
}
print(json.dumps(row))
