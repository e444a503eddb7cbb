"""The first step of BOOptimizer under a GFN1-xTB prior with a GFN2-xTB target: how far
the target's forces there lie from converged, and how much of that is the change of the
difference between the two methods over the step, which one observation cannot show.

    OMP_NUM_THREADS=1 python docs/notes/prior_first_step.py baker
    OMP_NUM_THREADS=1 python docs/notes/prior_first_step.py druglike
    OMP_NUM_THREADS=1 python docs/notes/prior_first_step.py baker --radius 1.0 \
        --molecules 03_acetylene 05_hydroxysulphane ...

``--radius`` sets the first step's trust radius and ``maxstep`` (Å), so that the step
reaches the model's minimum where the default radius cuts it.

Prints a Markdown row per molecule: the step's largest atomic move, the target's fmax
at the start and after the step, the largest change over the step of the residual force
r = F(GFN2) - F(GFN1) per atom, and the model's own view there, |F(GFN1) + r(start)|.
"""

import argparse
from pathlib import Path

import numpy as np
from ase.io import read

import asebo
from asebo import BOOptimizer
from calculators import get_calculator


def largest(vectors):
    return float(np.linalg.norm(vectors, axis=1).max())


def forces(preset, atoms, positions):
    probe = atoms.copy()
    probe.positions = positions
    probe.calc = get_calculator(preset)
    return probe.get_forces()


def first_step(path, radius=None):
    atoms = read(path)
    atoms.calc = get_calculator("gfn2")
    start = atoms.positions.copy()
    relax = BOOptimizer(
        atoms, prior=get_calculator("gfn1"), logfile=None, trust_radius=radius, maxstep=radius
    )
    relax.run(fmax=0.05, steps=1)
    after = atoms.positions.copy()
    residual_start = forces("gfn2", atoms, start) - forces("gfn1", atoms, start)
    residual_after = forces("gfn2", atoms, after) - forces("gfn1", atoms, after)
    return {
        "move": largest(after - start),
        "fmax start": largest(forces("gfn2", atoms, start)),
        "fmax after": largest(forces("gfn2", atoms, after)),
        "residual change": largest(residual_after - residual_start),
        "model's forces": largest(forces("gfn1", atoms, after) + residual_start),
    }


def main(set_name, radius=None, molecules=None):
    folder = Path(asebo.__file__).parent / "data" / set_name
    columns = ["move", "fmax start", "fmax after", "residual change", "model's forces"]
    print("| molecule | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    beyond = 0
    paths = [p for p in sorted(folder.glob("*.xyz")) if not molecules or p.stem in molecules]
    for path in paths:
        row = first_step(path, radius)
        beyond += row["residual change"] > 0.05
        print(f"| {path.stem} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    print(f"\n{beyond} of {len(paths)} with a residual change above 0.05 eV/Å")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set_name", choices=["baker", "druglike"])
    parser.add_argument("--radius", type=float)
    parser.add_argument("--molecules", nargs="+")
    arguments = parser.parse_args()
    main(arguments.set_name, arguments.radius, arguments.molecules)
