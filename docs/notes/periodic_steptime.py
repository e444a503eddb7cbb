"""Processor time per BOOptimizer step outside the calculator on a Cu(111) slab with
an adatom, bottom layer fixed; EMT, one thread.

    python docs/notes/periodic_steptime.py [KERNEL [STEPS [WIDTH LAYERS]]]

KERNEL is the optimizer's ``kernel`` (default: its own choice, ``'periodic'``). The
slab is WIDTH x WIDTH x LAYERS (default 4 x 4 x 4: 49 free atoms; 5 x 5 x 7: 151).
"""

import sys
import time

import numpy as np
import torch
from ase.build import add_adsorbate, fcc111
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms

from asebo import BOOptimizer
from calculators import CountingCalculator

torch.set_num_threads(1)
kernel = sys.argv[1] if len(sys.argv) > 1 else None
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
width, layers = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (4, 4)
slab = fcc111("Cu", (width, width, layers), vacuum=6.0)
add_adsorbate(slab, "Cu", 1.9, "fcc")
slab.set_constraint(FixAtoms(indices=[a.index for a in slab if a.tag == layers]))
slab.rattle(0.05, seed=0)
slab.calc = counter = CountingCalculator(EMT())
opt = BOOptimizer(slab, logfile=None, kernel=kernel)
times = []
last_cpu, last_calc = time.process_time(), 0.0
for _ in opt.irun(fmax=1e-4, steps=steps):
    now = time.process_time()
    times.append((now - last_cpu) - (counter.cpu_time - last_calc))
    last_cpu, last_calc = now, counter.cpu_time
free = int(opt.engine.free.all(axis=1).sum())
t = np.array(times[1:])
print(
    f"{free} free atoms, kernel {opt.representation.name}: {len(t)} steps, s/step outside "
    f"the calculator: mean {t.mean():.3f}, last 5 {t[-5:].mean():.3f}, max {t.max():.3f}"
)
