"""A hop's symmetry given to the saddle search (measured, not kept:
docs/notes/periodic-saddles.md).

Where the final minimum of a hop is the initial one under a map of the crystal (an
orthogonal map ``R`` that keeps the lattice, a translation ``t`` and a permutation of
like atoms), the IDPP midpoint is mapped onto itself and every configuration ``x``
computed gives a second one for free: ``R x + t`` with its atoms permuted has the
same energy and the forces ``R f`` permuted. Two ways of using it, each on the EMT hops
of ``asebo bench hop_saddles`` (both sets)::

    OMP_NUM_THREADS=1 python docs/notes/hop_symmetry.py mirrored pt_pt100 au_al100
    OMP_NUM_THREADS=1 python docs/notes/hop_symmetry.py subspace pt_pt100
    OMP_NUM_THREADS=1 python docs/notes/hop_symmetry.py band cu_vacancy

``mirrored``: BOSaddle from the midpoint with each observation's image appended to the
GP's data (the maps searched among the 48 signed permutations of the Cartesian axes,
the one that leaves the midpoint in place), beside the search without. ``subspace``:
the saddle point as a minimum within the midpoint's symmetric configurations
(``ase.constraints.FixSymmetry``), by BOOptimizer and by BFGS. The hop's saddle point
is where its free atoms' finite-difference Hessian has one negative curvature.
``band``: BONEB on the Cu vacancy band of ASE's ``test_precon_neb`` (Morse, three
moving images, ``k = 0.1``, fmax 0.01) with and without the images, and the middle
image's distance from the saddle point found with the hopping atom's bond to the
opposite neighbour held (the hop's name is not read).
"""

import argparse
import itertools

import numpy as np
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.morse import MorsePotential
from ase.constraints import FixAtoms, FixBondLength, FixSymmetry
from ase.geometry import find_mic, get_distances
from ase.mep import NEB
from ase.optimize import BFGS, ODE12r

from asebo import BONEB, BOOptimizer, BOSaddle
from asebo.benchmarks.hop_saddles import EVERY_HOP, free_curvatures, hop_guess
from asebo.optimize import surrogate_model
from calculators import CountingCalculator

TOLERANCE = 1e-2  # Å: an atom this close to another's image is its image


def axis_maps():
    """The 48 signed permutations of the Cartesian axes, (3, 3) each."""
    for order in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            rotation = np.zeros((3, 3))
            rotation[range(3), order] = signs
            yield rotation


def crystal_maps(first, second, numbers, cell, fixed):
    """Every (R, t, permutation) with ``R first_i + t = second_p[i]`` up to the cell's
    vectors, like atoms and held atoms onto held ones, ``R`` keeping the lattice."""
    inverse = np.linalg.inv(cell)
    maps = []
    for rotation in axis_maps():
        lattice = cell @ rotation.T @ inverse
        if not np.allclose(lattice, np.round(lattice), atol=1e-6):
            continue
        turned = first @ rotation.T  # (n, 3)
        for target in np.flatnonzero(numbers == numbers[0]):
            shift = second[target] - turned[0]
            offsets = second[None] - (turned + shift)[:, None]  # (n, n, 3)
            offsets -= np.round(offsets @ inverse) @ cell
            distances = np.linalg.norm(offsets, axis=-1)  # (n, n)
            permutation = distances.argmin(axis=1)
            if (
                distances[range(len(first)), permutation].max() < TOLERANCE
                and len(set(permutation)) == len(first)
                and np.all(numbers[permutation] == numbers)
                and np.all(fixed[permutation] == fixed)
            ):
                maps.append((rotation, shift, permutation))
    return maps


def image(positions, forces, crystal_map, cell):
    """The configuration and forces (n, 3) a map gives, each atom the image nearest to
    the same atom of ``positions``."""
    rotation, shift, permutation = crystal_map
    mapped, mapped_forces = np.empty_like(positions), np.empty_like(forces)
    mapped[permutation] = positions @ rotation.T + shift
    mapped_forces[permutation] = forces @ rotation.T
    mapped -= np.round((mapped - positions) @ np.linalg.inv(cell)) @ cell
    return mapped, mapped_forces


def with_images(crystal_map, cell):
    """``Surrogate.fitted`` replaced by a fit to the observations and their images."""
    original = surrogate_model.Surrogate.fitted

    def fitted(self, observations, near=None):
        seen = len(observations)
        if self._last_fit is None or self._last_fit[0] != seen:
            positions, energies, forces = (np.asarray(a) for a in observations.arrays())
            pairs = [image(p, f, crystal_map, cell) for p, f in zip(positions, forces)]
            arrays = (
                np.concatenate([positions, [p for p, _ in pairs]]),
                np.concatenate([energies, energies]),
                np.concatenate([forces, [f for _, f in pairs]]),
            )
            self._metric, notes = surrogate_model.fit_observations(
                self.gp, self.prior, self.representation, self.numbers, arrays, self._metric, near
            )
            self._last_fit = (seen, notes)
        return self.gp, self._last_fit[1]

    surrogate_model.Surrogate.fitted = fitted
    return original


def hop(name):
    initial, final = EVERY_HOP[name]()
    guess = hop_guess(initial, final)
    fixed = np.zeros(len(guess), bool)
    for constraint in guess.constraints:
        if isinstance(constraint, FixAtoms):
            fixed[constraint.index] = True
    return initial, final, guess, fixed


def report(label, name, atoms, calls, initial, fixed):
    atoms.set_constraint(FixAtoms(np.flatnonzero(fixed)))
    curvatures = free_curvatures(atoms, EMT())
    above = atoms.get_potential_energy() - initial.get_potential_energy()
    negative = np.round(curvatures[curvatures < 0], 2)
    print(f"{name} {label}: {calls} calls, {1000 * above:.0f} meV above, negative {negative}")


def mirrored(name):
    initial, final, guess, fixed = hop(name)
    cell = np.array(guess.cell)
    maps = crystal_maps(initial.positions, final.positions, guess.numbers, cell, fixed)
    if not maps:
        print(f"{name}: no map of the crystal takes the initial minimum to the final one")
        return
    zero = np.zeros_like(guess.positions)

    def moves_the_midpoint(crystal_map):  # Å: 0 where the map leaves the midpoint in place
        return np.abs(image(guess.positions, zero, crystal_map, cell)[0] - guess.positions).max()

    chosen = min(maps, key=moves_the_midpoint)
    for label in ("without images", "with images"):
        atoms = guess.copy()
        atoms.calc = CountingCalculator(EMT())
        original = with_images(chosen, cell) if label == "with images" else None
        try:
            BOSaddle(atoms, logfile=None).run(fmax=0.05, steps=200)
        finally:
            if original is not None:
                surrogate_model.Surrogate.fitted = original
        report(f"BOSaddle {label}", name, atoms, atoms.calc.ncalls, initial, fixed)


def subspace(name):
    initial, _, guess, fixed = hop(name)
    for label, optimizer in (("BOOptimizer", BOOptimizer), ("BFGS", BFGS)):
        atoms = guess.copy()
        atoms.set_constraint([FixAtoms(np.flatnonzero(fixed)), FixSymmetry(atoms, symprec=1e-3)])
        atoms.calc = CountingCalculator(EMT())
        optimizer(atoms, logfile=None).run(fmax=0.05, steps=200)
        report(f"{label} within the symmetry", name, atoms, atoms.calc.ncalls, initial, fixed)


def copper_vacancy_band():
    """ASE's vacancy hop in Cu under a Morse potential: the five images of the linear
    interpolation and the saddle point relaxed with the hopping bond held."""
    initial = bulk("Cu", cubic=True) * 2
    _, lengths = get_distances(np.diag(initial.cell) / 2, initial.positions, initial.cell, True)
    site = initial.positions[lengths.argmin()].copy()
    del initial[lengths.argmin()]
    vectors, lengths = get_distances(site, initial.positions, initial.cell, True)
    hopping = np.flatnonzero(np.abs(lengths[0] - lengths[0].min()) < 1e-8)[0]
    opposite = ((vectors[0] + vectors[0][hopping]) ** 2).sum(axis=1).argmin()
    final = initial.copy()
    final.positions[hopping] = site
    for state in (initial, final):
        state.calc = MorsePotential(A=4.0, epsilon=1.0, r0=2.55)
        ODE12r(state, logfile=None).run(fmax=1e-3)
    images = [initial] + [initial.copy() for _ in range(3)] + [final]
    NEB(images).interpolate()
    saddle = images[2].copy()
    saddle.calc = MorsePotential(A=4.0, epsilon=1.0, r0=2.55)
    saddle.set_constraint(FixBondLength(hopping, opposite))
    ODE12r(saddle, logfile=None).run(fmax=1e-2)
    return images, saddle


def band(_):
    images, saddle = copper_vacancy_band()
    cell = np.array(saddle.cell)
    fixed = np.zeros(len(saddle), bool)
    maps = crystal_maps(images[0].positions, images[-1].positions, saddle.numbers, cell, fixed)
    zero = np.zeros_like(saddle.positions)

    def moves_the_middle(crystal_map):  # Å: 0 where the map leaves the middle image in place
        return np.abs(
            image(images[2].positions, zero, crystal_map, cell)[0] - images[2].positions
        ).max()

    chosen = min(maps, key=moves_the_middle)
    asymmetry, _ = find_mic(image(saddle.positions, zero, chosen, cell)[0] - saddle.positions, cell)
    print(f"the saddle point by the held bond: {np.abs(asymmetry).max():.3f} Å from its own image")
    for label in ("without images", "with images"):
        copies = [each.copy() for each in images]
        for each in copies:
            each.calc = CountingCalculator(MorsePotential(A=4.0, epsilon=1.0, r0=2.55))
        original = with_images(chosen, cell) if label == "with images" else None
        try:
            BONEB(NEB(copies, k=0.1, method="improvedtangent"), logfile=None).run(fmax=1e-2)
        finally:
            if original is not None:
                surrogate_model.Surrogate.fitted = original
        calls = sum(each.calc.ncalls for each in copies[1:-1])
        offset, _ = find_mic(copies[2].positions - saddle.positions, cell)
        asymmetry, _ = find_mic(
            image(copies[2].positions, zero, chosen, cell)[0] - copies[2].positions, cell
        )
        print(
            f"BONEB {label}: {calls} calls, the middle image {np.abs(offset).max():.3f} Å from "
            f"the saddle point, {np.abs(asymmetry).max():.3f} Å from its own image"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("way", choices=("mirrored", "subspace", "band"))
    parser.add_argument("hops", nargs="+", choices=sorted(EVERY_HOP))
    args = parser.parse_args()
    for name in args.hops:
        {"mirrored": mirrored, "subspace": subspace, "band": band}[args.way](name)


if __name__ == "__main__":
    main()
