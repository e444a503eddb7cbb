"""Charge and spin of the benchmark structures that are not neutral closed shells.

tblite's ASE calculator reads a molecule's charge as the sum of its initial charges
and its unpaired electrons as the sum of its initial magnetic moments.
"""

import numpy as np

CHARGES = {"16_h2po4_anion": -1, "20_hconh3_cation": 1, "18_sn2": -1}
"""The net charge of each charged structure, by file stem (the rest are neutral)."""


def with_charge(atoms, name):
    """``atoms`` given the charge of ``name`` (:data:`CHARGES`, else neutral) and, where
    that leaves an odd number of electrons, one unpaired electron (a doublet); in place,
    returned."""
    charge = CHARGES.get(name, 0)
    charges = np.zeros(len(atoms))
    charges[0] = charge
    atoms.set_initial_charges(charges)
    moments = np.zeros(len(atoms))
    if (atoms.numbers.sum() - charge) % 2:
        moments[0] = 1.0
    atoms.set_initial_magnetic_moments(moments)
    return atoms
