"""Processor time of one BOOptimizer step outside the calculator, against observations.

Relaxes one molecule (default: menthone, 29 atoms, from the Baker set) with GFN2-xTB
and a force threshold it cannot reach, so that the run goes on to ``--observations``
plus half of ``--window`` calls, and measures after every step the processor time the
step took outside the calculator: the GP fit with its marginal likelihood and the
LCB minimisation. One thread (``torch.set_num_threads(1)``), processor time rather
than wall time, so that the figure does not depend on the load of a shared machine.
Prints the time per step over the window centred on ``--observations``.
"""

import os
import time

import numpy as np
from ase.io import read

from asebo.benchmarks.baker import DEFAULT_DIR


def add_arguments(parser):
    parser.add_argument("--molecule", default=str(DEFAULT_DIR / "29_menthone.xyz"),
                        help="structure file (default: Baker's menthone)")
    parser.add_argument("--observations", type=int, default=50,
                        help="observations at the centre of the measured window")
    parser.add_argument("--window", type=int, default=10,
                        help="steps measured around --observations")
    parser.add_argument("--calc", default="gfn2")


def step_times(atoms, calc, steps):
    """Processor seconds outside the calculator of each of ``steps`` BOOptimizer steps.

    Parameters
    ----------
    atoms : ase.Atoms
        The start (a copy is relaxed).
    calc : str or ase calculator
        Calculator preset, or a calculator.
    steps : int

    Returns
    -------
    ndarray of shape (steps,)
        Entry ``i`` is the step that follows observation ``i + 1``.
    """
    from asebo import BOOptimizer
    from calculators import CountingCalculator, get_calculator

    work = atoms.copy()
    counter = CountingCalculator(get_calculator(calc) if isinstance(calc, str) else calc)
    work.calc = counter
    marks = []  # (processor time, processor time in the calculator) after each step
    optimizer = BOOptimizer(work, logfile=None)
    optimizer.attach(lambda: marks.append((time.process_time(), counter.cpu_time)))
    optimizer.run(fmax=1e-8, steps=steps)
    marks = np.array(marks)  # (steps + 1, 2)
    return np.diff(marks[:, 0]) - np.diff(marks[:, 1])


def run(args):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    first = max(1, args.observations - args.window // 2)
    last = first + args.window
    atoms = read(args.molecule)
    times = step_times(atoms, args.calc, last)
    window = times[first - 1:last - 1]
    print(f"{os.path.basename(args.molecule)}: {len(atoms)} atoms, {args.calc}, one thread")
    print(f"processor seconds per step outside the calculator, observations {first}-{last - 1}:"
          f" mean {window.mean():.3f}, median {np.median(window):.3f}, max {window.max():.3f}")
    for start in range(0, last - 1, 10):
        print(f"  observations {start + 1:3d}-{min(start + 10, last - 1):3d}: "
              f"mean {times[start:start + 10].mean():.3f} s")
