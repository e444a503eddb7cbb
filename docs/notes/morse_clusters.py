"""Four xenon atoms under the Morse potential of Sella's test from random starts,
searched for a first-order saddle point to fmax 1e-3 eV/Å: BOSaddle (its walk on the
model in internal coordinates, or patched to Cartesian ones) and Sella in Cartesian and
internal coordinates; at each end the negative curvatures by finite differences, the
rigid motions left out (``tests/test_saddle_sella_cases.py``).

    python docs/notes/morse_clusters.py MODE SEED

MODE: bo, cart, sella or sellaint; SEED: ``numpy.random.RandomState``'s (4 is Sella's
test's).
"""

import sys
import time
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.calculators.morse import MorsePotential
from ase.units import kB
from sella import Sella

import asebo.saddle.walk as walk
from asebo import BOSaddle

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_saddle_sella_cases import curvatures  # noqa: E402


class CountedMorse(MorsePotential):
    """Xenon's Morse potential of Sella's test, its calls counted."""

    def __init__(self):
        super().__init__(alpha=226.9 * kB, r0=4.73, rho0=4.73 * 1.099)
        self.calls = 0

    def calculate(self, *args, **kwargs):
        self.calls += 1
        super().calculate(*args, **kwargs)


def cartesian_walk():
    """BOSaddle's walk on its model in Cartesian coordinates for a molecule too."""
    walk_on_model = walk.saddle_on_model

    def patched(*args, **kwargs):
        return walk_on_model(*args, **{**kwargs, "internal": False})

    walk.saddle_on_model = patched


def main(mode, seed):
    if mode == "cart":
        cartesian_walk()
    positions = np.random.RandomState(seed).normal(size=(4, 3), scale=3.0)
    atoms = Atoms(["Xe"] * 4, positions)
    atoms.calc = CountedMorse()
    start = time.perf_counter()
    if mode.startswith("sella"):
        search = Sella(atoms, internal=mode == "sellaint", order=1, logfile=None)
    else:
        search = BOSaddle(atoms, logfile=None)
    converged = search.run(fmax=1e-3, steps=400)
    largest = np.linalg.norm(atoms.get_forces(), axis=1).max()
    negative = int((curvatures(atoms) < 0).sum())
    print(
        f"{mode} seed {seed}: run() {converged}, {atoms.calc.calls} calls, fmax {largest:.1e}, "
        f"{negative} negative curvatures, energy {atoms.get_potential_energy():.4f} eV, "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
