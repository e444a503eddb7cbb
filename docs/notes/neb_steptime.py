"""BONEB's time outside the calculator on a molecular band with GFN2-xTB.

A reaction of Birkholz and Schlegel's set shipped with asebo (its end states relaxed
with BFGS to 0.01 eV/Å), ``--images`` moving images by IDPP, climbing image,
``improvedtangent``; BONEB with its defaults runs until the band converges (fmax 0.05
eV/Å) or for ``--calls`` calls of the moving images. Printed: the atoms, the calls and
whether the band converged, the wall time, the time inside the calculator, and the
mean time per call outside it (the GP's fit, the band relaxed on it, the choice of the
image).

    OMP_NUM_THREADS=1 python docs/notes/neb_steptime.py --reaction 06_dacp2 --calls 100
"""

import argparse
import time

from ase.calculators.calculator import Calculator, all_changes
from ase.mep import NEB

from asebo.benchmarks.neb import REACTIONS, gfn2, idpp_band, reaction
from asebo.neb import BONEB


class Timed(Calculator):
    """GFN2-xTB, with the seconds spent in it added to ``spent`` (a one-item list)."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, spent):
        super().__init__()
        self.calc, self.spent = gfn2(), spent

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        start = time.perf_counter()
        energy = self.calc.get_potential_energy(self.atoms)
        forces = self.calc.get_forces(self.atoms)  # (n, 3)
        self.spent[0] += time.perf_counter() - start
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reaction", default="06_dacp2", help="file name without .xyz")
    parser.add_argument("--images", type=int, default=7, help="moving images")
    parser.add_argument("--calls", type=int, default=100, help="calls of the moving images")
    args = parser.parse_args()
    initial, final, _ = reaction(REACTIONS / f"{args.reaction}.xyz")
    spent = [0.0]
    images = []
    for index, positions in enumerate(idpp_band(initial, final, args.images)):
        image = (final if index == args.images + 1 else initial).copy()
        image.positions = positions
        image.calc = Timed(spent)
        images.append(image)
    optimizer = BONEB(NEB(images, climb=True, method="improvedtangent"), logfile=None)
    start = time.perf_counter()
    converged = optimizer.run(fmax=0.05, steps=args.calls)
    wall = time.perf_counter() - start
    print(
        f"{args.reaction}: {len(initial)} atoms, {args.images} moving images, "
        f"{optimizer.nsteps} calls ({'converged' if converged else 'not converged'}), "
        f"{wall:.1f} s, {spent[0]:.1f} s in the calculator, "
        f"{(wall - spent[0]) / optimizer.nsteps:.2f} s per call outside it"
    )


if __name__ == "__main__":
    main()
