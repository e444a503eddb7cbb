"""Maps of a periodic configuration onto itself, and the free observations they give.

An orthogonal map ``R`` that carries the lattice onto itself, with a translation ``t``
and a permutation ``p`` of like atoms, leaves the energy of every configuration of a
periodic system unchanged: ``E(g(x)) = E(x)`` for ``g(x)_{p[i]} = R x_i + t``, and
the forces turn with it, ``f(g(x))_{p[i]} = R f_i(x)``. Where such a map also carries
the start of a saddle search onto itself (the IDPP midpoint of a hop between two
equivalent sites: a vacancy hop, an adatom from one (100) hollow to the next) and
reverses the mode climbed from it, each configuration computed gives its image under
the map as a second observation at no call (the symmetry-adapted sampling of E. B.
Wilson, J. C. Decius and P. C. Cross, *Molecular Vibrations*, McGraw-Hill (1955),
ch. 5, applied to the GP's data). :func:`crystal_maps` finds the maps of a
configuration, :func:`reversing_map` the one that reverses a mode, and
:meth:`CrystalMap.images` the observations it gives.
"""

import itertools
from dataclasses import dataclass

import numpy as np

TOLERANCE = 1e-2  # Å: an atom this close to the image of another is that image
REVERSED = 0.9  # the overlap with its own image below which a unit mode is reversed
FIRST_CHECKED = 8  # atoms whose images a candidate map must match before all are tried
NEIGHBOURS = 12  # nearest atoms whose distances tell which atoms can be images of which


@dataclass(frozen=True)
class CrystalMap:
    """``g(x)_{p[i]} = R x_i + t``, each image atom moved by a lattice vector to lie
    nearest the same atom of ``x``.

    Attributes
    ----------
    rotation : array (3, 3)
        ``R``, orthogonal, carrying the lattice onto itself.
    translation : array (3,)
        ``t``, Å.
    permutation : array (n,) of int
        ``p``: atom ``i`` goes to the place of atom ``p[i]``.
    cell : array (3, 3)
        The lattice vectors (rows), Å.
    """

    rotation: np.ndarray
    translation: np.ndarray
    permutation: np.ndarray
    cell: np.ndarray

    def turned(self, vectors):
        """Displacements or forces ``vectors`` (..., n, 3) under the map."""
        vectors = np.asarray(vectors, dtype=float)
        turned = np.empty_like(vectors)
        turned[..., self.permutation, :] = vectors @ self.rotation.T
        return turned

    def images(self, positions, forces):
        """The configurations (m, n, 3) and forces (m, n, 3) the map gives from
        ``positions`` (m, n, 3) and ``forces`` (m, n, 3): the same energies."""
        positions = np.asarray(positions, dtype=float)
        mapped = np.empty_like(positions)
        mapped[..., self.permutation, :] = positions @ self.rotation.T + self.translation
        return mapped - _lattice_shift(mapped - positions, self.cell), self.turned(forces)

    def as_state(self):
        """The map as a dict of arrays, for a restart file."""
        return {
            "rotation": self.rotation,
            "translation": self.translation,
            "permutation": self.permutation,
            "cell": self.cell,
        }

    @classmethod
    def from_state(cls, state):
        """The map :meth:`as_state` wrote."""
        return cls(
            np.asarray(state["rotation"], dtype=float),
            np.asarray(state["translation"], dtype=float),
            np.asarray(state["permutation"], dtype=int),
            np.asarray(state["cell"], dtype=float),
        )


def lattice_rotations(cell):
    """The orthogonal maps (k, 3, 3) that carry the lattice of ``cell`` (3, 3; rows the
    lattice vectors) onto itself, the identity first: those whose matrix on the
    fractional coordinates is whole with entries -1, 0 and 1 (every point-group
    operation of a reduced cell)."""
    cell = np.asarray(cell, dtype=float)
    inverse = np.linalg.inv(cell)
    entries = np.array(list(itertools.product((-1, 0, 1), repeat=9)), dtype=float)
    fractional = entries.reshape(-1, 3, 3)  # (3^9, 3, 3): f' = f M
    rotations = np.transpose(inverse @ fractional @ cell, (0, 2, 1))  # x' = R x
    orthogonal = np.abs(rotations @ np.transpose(rotations, (0, 2, 1)) - np.eye(3)).max(axis=(1, 2))
    kept = rotations[orthogonal < 1e-6]
    identity = np.abs(kept - np.eye(3)).max(axis=(1, 2)) < 1e-9
    return np.concatenate([kept[identity], kept[~identity]])


def crystal_maps(positions, numbers, cell, held, tolerance=TOLERANCE):
    """The maps (:class:`CrystalMap`, the identity left out) that carry ``positions``
    (n, 3) onto themselves within ``tolerance`` Å up to lattice vectors of ``cell``
    (3, 3), like atoms (``numbers`` (n,)) onto like atoms and ``held`` (n,) atoms
    (FixAtoms) onto held ones."""
    positions = np.asarray(positions, dtype=float)
    numbers, held = np.asarray(numbers), np.asarray(held, dtype=bool)
    cell = np.asarray(cell, dtype=float)
    n = len(positions)
    maps = []
    alike = _alike(positions, numbers, held, cell, tolerance)  # (n, n)
    anchor = int(alike.sum(axis=1).argmin())  # an atom of the rarest kind
    first = np.argsort(alike.sum(axis=1), kind="stable")[:FIRST_CHECKED]  # rarest first
    for rotation in lattice_rotations(cell):
        turned = positions @ rotation.T  # (n, 3)
        for target in np.flatnonzero(alike[anchor]):
            translation = positions[target] - turned[anchor]
            first_distances, _ = _nearest_image_distances(
                turned[first] + translation, positions, cell
            )
            if first_distances.max() > tolerance:
                continue
            distances, permutation = _nearest_image_distances(turned + translation, positions, cell)
            if (
                distances.max() > tolerance
                or len(np.unique(permutation)) < n
                or np.any(numbers[permutation] != numbers)
                or np.any(held[permutation] != held)
                or (np.array_equal(permutation, np.arange(n)) and np.allclose(rotation, np.eye(3)))
            ):
                continue
            maps.append(CrystalMap(rotation, translation, permutation, cell))
    return maps


def _alike(positions, numbers, held, cell, tolerance):
    """Whether two atoms (n, n) can be images of each other under a map: the same
    number, both held or both free, and the same distances to their
    :data:`NEIGHBOURS` nearest atoms (up to lattice vectors) within twice
    ``tolerance``."""
    offsets = positions[None] - positions[:, None]  # (n, n, 3)
    offsets -= _lattice_shift(offsets, cell)
    distances = np.sort(np.linalg.norm(offsets, axis=-1), axis=1)[:, 1 : NEIGHBOURS + 1]
    same_shell = np.abs(distances[:, None] - distances[None]).max(axis=-1) <= 2 * tolerance
    return same_shell & (numbers[:, None] == numbers[None]) & (held[:, None] == held[None])


def _nearest_image_distances(points, positions, cell):
    """For each of ``points`` (k, 3), the distance (k,) to the nearest of ``positions``
    (n, 3) up to lattice vectors of ``cell`` (3, 3), and that atom's index (k,)."""
    offsets = positions[None] - points[:, None]  # (k, n, 3)
    offsets -= _lattice_shift(offsets, cell)
    distances = np.linalg.norm(offsets, axis=-1)  # (k, n)
    nearest = distances.argmin(axis=1)
    return distances[np.arange(len(points)), nearest], nearest


def _lattice_shift(offsets, cell):
    """The lattice vectors of ``cell`` (3, 3) that the fractional coordinates of
    ``offsets`` (..., 3) round to: less them, each offset is its image nearest to zero
    (for cells that are not too skewed; exactly for an image on a lattice point)."""
    return np.round(offsets @ np.linalg.inv(cell)) @ cell


def reversing_map(positions, numbers, cell, held, mode):
    """The map of ``positions`` (n, 3) onto themselves (:func:`crystal_maps`) that
    turns the unit ``mode`` (n, 3) most nearly into its opposite, where the overlap of
    the two is below ``-REVERSED``; else None."""
    best, lowest = None, -REVERSED
    cell = full_cell(cell, positions)
    for candidate in crystal_maps(positions, numbers, cell, held):
        overlap = float(np.vdot(mode, candidate.turned(mode)))
        if overlap < lowest:
            best, lowest = candidate, overlap
    return best


def full_cell(cell, positions):
    """``cell`` (3, 3) with each zero vector (a slab built without vacuum has no third
    one) completed orthogonally to the others and longer than twice the extent of
    ``positions`` (n, 3): a lattice of the periodic directions alone, no atom with an
    image along the completed one."""
    from ase.cell import Cell

    cell = Cell(np.asarray(cell, dtype=float))
    missing = cell.lengths() == 0.0
    if not missing.any():
        return cell.array
    completed = cell.complete().array  # the missing vectors of unit length
    extent = float(np.ptp(np.asarray(positions, dtype=float), axis=0).max())
    completed[missing] *= 2.0 * extent + 10.0
    return completed
