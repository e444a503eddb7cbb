"""Whether a molecule's bonding changed between two configurations.

A local optimizer may end in another minimum than the one near its start; from a
rough start that can be another molecule (a hydrogen moved over, a ring opened).
The bond graph is read from covalent radii (:data:`ase.data.covalent_radii`, those of
:func:`ase.neighborlist.natural_cutoffs`):
atoms ``i`` and ``j`` are bonded within :data:`BONDED` times the sum of their radii,
and apart beyond :data:`APART` times it. A bond counts as broken where it was bonded
in the first configuration and is apart in the last, and as made the other way
round: between the two factors a pair is neither, so a bond stretched by a rattled
start and relaxed back is no change. At a transition-state guess a pair stretched beyond
:data:`STRETCHED` times the sum of its radii and short of :data:`APART` is a bond being
made or broken (:func:`partial_bonds`).
"""

from dataclasses import dataclass

import numpy as np
from ase.data import chemical_symbols, covalent_radii

BONDED = 1.2  # times the sum of covalent radii: bonded within
APART = 1.5  # times the sum of covalent radii: not bonded beyond
STRETCHED = 1.08  # times the sum of covalent radii: longer than an equilibrium bond


@dataclass(frozen=True)
class BondChanges:
    """The bonds broken and made from one configuration to another.

    Attributes
    ----------
    broken, made : tuple of (int, int)
        Atom index pairs ``(i, j)``, ``i < j``, in ascending order.
    labels : tuple of str
        Symbol and index of each atom, for :meth:`describe`.
    """

    broken: tuple
    made: tuple
    labels: tuple

    def __bool__(self):
        return bool(self.broken or self.made)

    def describe(self):
        """One line: 'bonding changed: C3-O7 broken, O7-H12 made'; '' where none did."""
        if not self:
            return ""
        pairs = [(pair, "broken") for pair in self.broken] + [(pair, "made") for pair in self.made]
        listed = ", ".join(f"{self.labels[i]}-{self.labels[j]} {what}" for (i, j), what in pairs)
        return f"bonding changed: {listed}"


def bond_changes(numbers, first, last):
    """The :class:`BondChanges` of a molecule of atomic ``numbers`` (n,) from the
    positions ``first`` (n, 3) to ``last`` (n, 3)."""
    numbers = np.asarray(numbers)
    scale = _radius_sums(numbers)
    before, after = (_relative_distances(positions, scale) for positions in (first, last))
    upper = np.triu(np.ones_like(scale, dtype=bool), k=1)
    broken = upper & (before < BONDED) & (after > APART)
    made = upper & (before > APART) & (after < BONDED)
    symbols = [f"{chemical_symbols[number]}{index}" for index, number in enumerate(numbers)]
    return BondChanges(_pairs(broken), _pairs(made), tuple(symbols))


def partial_bonds(numbers, positions):
    """The pairs ``(i, j)``, ``i < j``, of a molecule of atomic ``numbers`` (n,) at
    ``positions`` (n, 3) stretched beyond any equilibrium bond and not apart (between
    :data:`STRETCHED` and :data:`APART` times the sum of their covalent radii): at a
    transition-state guess, the bonds being made or broken, a hydrogen's bond to the
    atom it leaves or reaches included."""
    relative = _relative_distances(positions, _radius_sums(numbers))  # (n, n)
    upper = np.triu(np.ones_like(relative, dtype=bool), k=1)
    return _pairs(upper & (relative >= STRETCHED) & (relative <= APART))


def _radius_sums(numbers):
    """The sums of covalent radii (n, n) of every pair of atoms of ``numbers`` (n,)."""
    radii = covalent_radii[np.asarray(numbers)]
    return radii[:, None] + radii[None, :]


def _relative_distances(positions, scale):
    """Interatomic distances (n, n) over ``scale`` (n, n), the sums of covalent radii."""
    positions = np.asarray(positions, dtype=np.float64)
    return np.linalg.norm(positions[:, None] - positions[None], axis=-1) / scale


def _pairs(mask):
    """The index pairs (i, j) where ``mask`` (n, n) holds, in ascending order."""
    return tuple((int(i), int(j)) for i, j in zip(*np.nonzero(mask)))
