"""Amines and phosphines outside the Baker set, each start with its pyramidal
nitrogen or phosphorus centres put flat in the plane of their three neighbours (as a
builder that draws them planar does): the check of the flat-centre tilt
(``Rules.tilt_flat_centres``) on molecules it was not tuned on.

Each molecule is embedded from SMILES (RDKit ETKDGv3 seed 5, MMFF94), then every
three-coordinate N or P outside a ring is moved to the centroid-plane of its
neighbours. Every start is relaxed with GFN2-xTB to fmax 0.05 eV/Å by BOOptimizer with
the tilt on and off, and by ASE's L-BFGS; printed: calls, the energy reached, and the
sum of the three angles at the first flat centre (360 degrees: flat).

    python docs/notes/flat_heldout.py
"""

import numpy as np
from ase.optimize import LBFGS

from asebo import BOOptimizer
from asebo.campaign.relax import EnergyRecorder
from asebo.optimize.settings import Rules
from asebo.smiles import molecule_from_smiles
from calculators import get_calculator

SMILES = {
    "ethylamine": "CCN",
    "dimethylamine": "CNC",
    "trimethylamine": "CN(C)C",
    "isopropylamine": "CC(C)N",
    "ethanolamine": "NCCO",
    "ethylenediamine": "NCCN",
    "hydrazine": "NN",
    "methylhydrazine": "CNN",
    "hydroxylamine": "NO",
    "methoxyamine": "CON",
    "n_methylaniline": "CNc1ccccc1",
    "methylphosphine": "CP",
    "dimethylphosphine": "CPC",
    "trimethylphosphine": "CP(C)C",
    "triethylamine": "CCN(CC)CC",
    "diethylamine": "CCNCC",
}


def flat_centres(atoms):
    """Indices of the three-coordinate N and P atoms (1.25 x covalent radii)."""
    from ase.neighborlist import natural_cutoffs, neighbor_list

    first, second = neighbor_list("ij", atoms, natural_cutoffs(atoms, mult=1.25))
    centres = []
    for index, symbol in enumerate(atoms.get_chemical_symbols()):
        neighbours = second[first == index]
        if symbol in ("N", "P") and len(neighbours) == 3:
            centres.append((index, neighbours))
    return centres


def flattened(atoms):
    """``atoms`` with each centre of :func:`flat_centres` moved into the plane of its
    three neighbours, keeping its distance to their centroid's normal line."""
    atoms = atoms.copy()
    for index, neighbours in flat_centres(atoms):
        points = atoms.positions[neighbours]  # (3, 3)
        centroid = points.mean(axis=0)
        normal = np.cross(points[1] - points[0], points[2] - points[0])
        normal /= np.linalg.norm(normal)
        offset = atoms.positions[index] - centroid
        atoms.positions[index] -= np.dot(offset, normal) * normal
    return atoms


def angle_sum(atoms):
    index, neighbours = flat_centres(atoms)[0]
    pairs = [(0, 1), (0, 2), (1, 2)]
    return sum(atoms.get_angle(neighbours[a], index, neighbours[b]) for a, b in pairs)


def relax(start, kind):
    atoms = start.copy()
    atoms.calc = counter = EnergyRecorder(get_calculator("gfn2"))
    if kind == "lbfgs":
        optimizer = LBFGS(atoms, logfile=None)
    else:
        rules = Rules(tilt_flat_centres=kind == "bo")
        optimizer = BOOptimizer(atoms, logfile=None, rules=rules)
    converged = optimizer.run(fmax=0.05, steps=300)
    return counter.ncalls, converged, atoms.get_potential_energy(), angle_sum(atoms)


def main():
    totals = {"bo": 0, "bo, no tilt": 0, "lbfgs": 0}
    higher = {"bo": 0, "bo, no tilt": 0, "lbfgs": 0}
    print("| molecule | bo | bo, no tilt | L-BFGS |")
    print("|---|---|---|---|")
    for name, smiles in SMILES.items():
        start = flattened(molecule_from_smiles(smiles, random_state=5))
        found = {kind: relax(start, kind) for kind in ("bo", "bo, no tilt", "lbfgs")}
        lowest = min(energy for _, _, energy, _ in found.values())
        cells = []
        for kind, (calls, converged, energy, angles) in found.items():
            totals[kind] += calls
            higher[kind] += energy > lowest + 0.01
            flag = "" if converged else ", not converged"
            cells.append(f"{calls} ({energy - lowest:+.3f} eV, {angles:.0f}°{flag})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| **calls in all** | " + " | ".join(str(totals[k]) for k in totals) + " |")
    print("| **> 0.01 eV above the lowest** | " + " | ".join(str(higher[k]) for k in higher) + " |")


if __name__ == "__main__":
    main()
