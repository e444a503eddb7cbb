"""Starts on a symmetric saddle or close to one, built from ASE's G2 geometries.

A start that keeps a point group has no force along the modes that break it, so a
rotor turned eclipsed stays on its saddle under every optimizer that steps along
gradients. These builders make the starts that ``examples/symmetric_starts.py``
compares optimizers on and that the tests of the curvature check and the symmetry
probe start from:

- :data:`SYMMETRIC_SADDLES`: ethane, methylsilane and disilane with one group turned
  60 degrees about the bond, exactly eclipsed (D3h, C3v, D3h; :func:`symmetric_saddle`);
- :data:`SYMMETRIC_METHYL_ROTORS`: a methyl group turned half a turn about its own
  axis, which keeps the point group where the axis lies in a mirror plane
  (:func:`methyl_turned_about_its_axis`);
- :data:`NEAR_SYMMETRIC_SADDLES`: a methyl group turned 60 degrees about its bond, which
  G2's hydrogens are not symmetric about, so no symmetry is kept
  (:func:`methyl_turned`);
- :data:`MINIMA`: G2 molecules at their symmetric geometries.
"""

import numpy as np
from ase.build import molecule

SYMMETRIC_SADDLES = {
    "ethane": ("C2H6", 6),
    "methylsilane": ("CH3SiH3", 14),
    "disilane": ("Si2H6", 14),
}
"""Label: (G2 name, atomic number of the atom whose hydrogens are turned eclipsed)."""
NEAR_SYMMETRIC_SADDLES = (
    "CH3OH",
    "H3CNH2",
    "C3H8",
    "CH3CHO",
    "CH3OCH3",
    "CH3SH",
    "CH3CH2OH",
    "CH3COOH",
)
SYMMETRIC_METHYL_ROTORS = (*NEAR_SYMMETRIC_SADDLES, "CH3NO2", "isobutane", "CH3COCl")
MINIMA = ("C2H6", "CH3OH", "C3H8", "C6H6", "NH3", "H2O2", "CH3CHO", "CH3OCH3")


def turned(name, centre, angle=60.0):
    """G2's ``name`` with the hydrogens bonded to atom ``centre`` turned ``angle`` degrees
    about its bond to its heavy neighbour."""
    atoms = molecule(name)
    distances = atoms.get_all_distances()[centre]
    hydrogens = np.flatnonzero((distances < 1.6) & (atoms.numbers == 1))
    heavy = np.flatnonzero(atoms.numbers > 1)
    heavy = heavy[heavy != centre]
    neighbour = heavy[np.argmin(distances[heavy])]
    axis = atoms.positions[centre] - atoms.positions[neighbour]
    group = atoms[hydrogens]
    group.rotate(angle, axis, center=atoms.positions[centre])
    atoms.positions[hydrogens] = group.positions
    return atoms


def symmetric_saddle(name, element):
    """G2's ``name`` with the hydrogens of its last atom of ``element`` turned eclipsed."""
    return turned(name, int(np.flatnonzero(molecule(name).numbers == element)[-1]))


def first_methyl(atoms):
    """The carbon of the first methyl group of ``atoms`` and its three hydrogens."""
    distances = atoms.get_all_distances()
    for carbon in np.flatnonzero(atoms.numbers == 6):
        hydrogens = np.flatnonzero((distances[carbon] < 1.2) & (atoms.numbers == 1))
        if len(hydrogens) == 3:
            return carbon, hydrogens
    raise ValueError(f"{atoms.get_chemical_formula()} has no methyl group")


def methyl_turned(name):
    """G2's ``name`` with its first methyl group turned 60 degrees about its bond."""
    return turned(name, first_methyl(molecule(name))[0])


def methyl_turned_about_its_axis(name):
    """G2's ``name`` with its first methyl group turned half a turn about the axis from
    its carbon to its hydrogens' centroid (for a threefold rotor, as a sixth of a turn):
    eclipsed, and where that axis lies in a mirror plane, the point group kept."""
    atoms = molecule(name)
    carbon, hydrogens = first_methyl(atoms)
    axis = atoms.positions[hydrogens].mean(axis=0) - atoms.positions[carbon]
    group = atoms[hydrogens]
    group.rotate(180.0, axis, center=atoms.positions[carbon])
    atoms.positions[hydrogens] = group.positions
    return atoms
