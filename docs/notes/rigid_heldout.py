"""The rigid move on molecules it was not tuned on: GPAW's five check molecules.

The rigid move along the net force and torque (``Rules.rigid_move``) and its shrinking
after each call that finds nothing lower (``SpecialCases.rigid_shrink``) act only with a
calculator on a real-space grid, whose egg-box ripple leaves a net force. They were
tuned on GPAW water and nitrogen dioxide. Here ammonia, formaldehyde, methanol, formic
acid and acetaldehyde (G2 geometries, every coordinate perturbed by Gaussian noise of
0.1 Å, seeds 0, 1, ...), which played no part in any choice, are relaxed with GPAW
(the ``gpaw`` preset: LCAO, dzp, grid spacing 0.2 Å) to ``--fmax`` (eV/Å) by BOOptimizer
with every rule on, with the rigid move off, and with it never shrinking. Printed per
run: calls, converged, energy, and how many proposals were rigid moves.

    OMP_NUM_THREADS=1 python docs/notes/rigid_heldout.py --starts 3 --fmax 0.01 --jobs 2
"""

import argparse
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from ase.build import molecule

from asebo import BOOptimizer
from asebo.optimize.settings import Rules, SpecialCases
from calculators import get_calculator

MOLECULES = {
    "ammonia": "NH3",
    "formaldehyde": "H2CO",
    "methanol": "CH3OH",
    "formic_acid": "HCOOH",
    "acetaldehyde": "CH3CHO",
}
VARIANTS = {
    "all on": {},
    "rigid_move off": {"rules": Rules(rigid_move=False)},
    "rigid_shrink 1.0": {"special_cases": SpecialCases(rigid_shrink=1.0)},
}


def relax(task):
    """One run: (calls, converged, energy, rigid moves)."""
    name, seed, variant, fmax, steps = task
    atoms = molecule(MOLECULES[name])
    atoms.positions += np.random.default_rng(seed).normal(scale=0.1, size=atoms.positions.shape)
    atoms.calc = get_calculator("gpaw")
    optimizer = BOOptimizer(atoms, logfile=None, **VARIANTS[variant])
    converged = optimizer.run(fmax=fmax, steps=steps)
    reasons = Counter(optimizer.reasons)
    return len(optimizer.energies), converged, min(optimizer.energies), reasons["rigid_move"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--fmax", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    tasks = [
        (name, seed, variant, args.fmax, args.steps)
        for name in MOLECULES
        for seed in range(args.starts)
        for variant in VARIANTS
    ]
    totals = Counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for task, (calls, converged, energy, rigid) in zip(tasks, pool.map(relax, tasks)):
            name, seed, variant = task[:3]
            totals[variant] += calls
            star = "" if converged else "*"
            print(
                f"{name}/{seed} {variant}: {calls}{star} calls, {energy:.4f} eV, "
                f"{rigid} rigid moves",
                flush=True,
            )
    for variant in VARIANTS:
        print(f"{variant}: {totals[variant]} calls in all")


if __name__ == "__main__":
    main()
