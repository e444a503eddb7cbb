"""Ethane started eclipsed: a saddle that only a call off its symmetry can tell.

One methyl group of ASE's staggered ethane is turned by 60 degrees about the C-C
bond, to the eclipsed geometry, a first-order saddle of the methyl rotation. Each
optimizer relaxes it with GFN2-xTB to fmax 0.05 eV/Å; the table gives its force
calls, its energy above the staggered minimum and the H-C-C-H dihedral (0 degrees
eclipsed, 60 staggered). ``bo, probe`` is ``BOOptimizer`` with
``SpecialCases(symmetry_probe=0.1)``: one call off the symmetry every configuration
kept. Then the model's curvature along the torsion at the default ``BOOptimizer``'s
endpoint, with its standard deviation, against the target's by central differences.
A few seconds.
"""

import argparse

import numpy as np
from ase.build import molecule
from ase.optimize import LBFGS

from asebo import BOOptimizer
from asebo.optimize.model_hessian import model_curvature
from asebo.optimize.settings import SpecialCases
from calculators import CountingCalculator, get_calculator


def eclipsed_ethane():
    """Ethane with its second methyl group turned 60 degrees about the C-C bond."""
    atoms = molecule("C2H6")
    first, second = np.flatnonzero(atoms.numbers == 6)
    axis = atoms.positions[second] - atoms.positions[first]
    turned = atoms[_hydrogens_of(atoms, second)]
    turned.rotate(60, axis, center=atoms.positions[second])
    atoms.positions[_hydrogens_of(atoms, second)] = turned.positions
    return atoms


def _hydrogens_of(atoms, carbon):
    near = np.linalg.norm(atoms.positions - atoms.positions[carbon], axis=1) < 1.2
    return np.flatnonzero(near & (atoms.numbers == 1))


def torsion_mode(atoms):
    """The unit (3n,) displacement turning the two methyl groups against each other."""
    first, second = np.flatnonzero(atoms.numbers == 6)
    axis = atoms.positions[second] - atoms.positions[first]
    axis /= np.linalg.norm(axis)
    mode = np.zeros((len(atoms), 3))
    for carbon, sign in ((first, -1.0), (second, 1.0)):
        for hydrogen in _hydrogens_of(atoms, carbon):
            arm = atoms.positions[hydrogen] - atoms.positions[carbon]
            mode[hydrogen] = sign * np.cross(axis, arm)
    return mode.reshape(-1) / np.linalg.norm(mode)


def dihedral(atoms):
    """The H-C-C-H dihedral nearest zero, degrees."""
    first, second = np.flatnonzero(atoms.numbers == 6)
    h = _hydrogens_of(atoms, first)[0]
    angles = [atoms.get_dihedral(h, first, second, k) for k in _hydrogens_of(atoms, second)]
    return min(min(a % 120, 120 - a % 120) for a in angles)


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    staggered = molecule("C2H6")
    staggered.calc = get_calculator("gfn2")
    LBFGS(staggered, logfile=None).run(fmax=0.005)
    minimum = staggered.get_potential_energy()
    makers = {
        "bo": lambda atoms: BOOptimizer(atoms, logfile=None),
        "bo, probe": lambda atoms: BOOptimizer(
            atoms, logfile=None, special_cases=SpecialCases(symmetry_probe=0.1)
        ),
        "lbfgs": lambda atoms: LBFGS(atoms, logfile=None),
    }
    try:
        from sella import Sella

        makers["sella"] = lambda atoms: Sella(atoms, internal=True, logfile=None)
    except ImportError:
        print("sella is not installed (pip install 'asebo[sella]'): left out")
    print("| optimizer | calls | eV above staggered | H-C-C-H dihedral, degrees |")
    print("|---|---|---|---|")
    for name, make in makers.items():
        atoms = eclipsed_ethane()
        atoms.calc = CountingCalculator(get_calculator("gfn2"))
        optimizer = make(atoms)
        optimizer.run(fmax=0.05, steps=100)
        above = atoms.get_potential_energy() - minimum
        print(f"| {name} | {atoms.calc.ncalls} | {above:.3f} | {dihedral(atoms):.1f} |")
        if name == "bo":
            endpoint = optimizer

    atoms = endpoint.atoms
    x = atoms.get_positions()
    curvature = model_curvature(endpoint.fit_model(), x, np.ones(x.shape, dtype=bool))
    mode = torsion_mode(atoms)
    along = int(np.argmax((curvature.modes @ mode) ** 2))
    target = atoms.copy()
    target.calc = get_calculator("gfn2")
    step = 0.01
    energies = []
    for sign in (1.0, 0.0, -1.0):
        target.positions = x + sign * step * mode.reshape(-1, 3)
        energies.append(target.get_potential_energy())
    true = (energies[0] - 2.0 * energies[1] + energies[2]) / step**2
    print(
        f"torsion at bo's endpoint: model {curvature.curvatures[along]:.2f} ± "
        f"{curvature.uncertainties[along]:.2f} eV/Å², target {true:.2f} eV/Å²"
    )


if __name__ == "__main__":
    main()
