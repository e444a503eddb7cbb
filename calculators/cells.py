"""Checks that periodic Atoms describe a cell a plane-wave or real-space code can run."""

import numpy as np

from asebo.model.closest_approach import CLOSEST_APPROACH as MIN_DISTANCE

from .kpoints import AXES

MIN_VOLUME = 1e-6  # Å³


def check_periodic_cell(atoms, min_distance=MIN_DISTANCE):
    """Raise a one-line ValueError where ``atoms`` is not a cell a DFT code can compute.

    Checked in this order: every periodic direction has a nonzero lattice vector;
    the cell has a volume (a slab needs a length along its non-periodic axis: the
    vacuum); every atom lies inside the cell along the non-periodic axes; no two
    atoms, or an atom and its own periodic image, are closer than ``min_distance``
    (minimum image, so across the cell boundary too).

    Parameters
    ----------
    atoms : ase.Atoms
        With at least one periodic direction.
    min_distance : float
        Shortest distance in Å allowed between atoms.

    Raises
    ------
    ValueError
        With what is wrong and how to fix it.
    """
    cell = np.asarray(atoms.cell, dtype=float)  # (3, 3)
    pbc = np.asarray(atoms.pbc, dtype=bool)  # (3,)
    lengths = np.linalg.norm(cell, axis=1)  # (3,)
    for axis in np.flatnonzero(pbc & (lengths < 1e-6)):
        raise ValueError(
            f"atoms are periodic along {AXES[axis]} but the cell vector there is zero: "
            "set atoms.cell (e.g. from ase.build) or atoms.pbc"
        )
    if abs(np.linalg.det(cell)) < MIN_VOLUME:
        flat = [AXES[axis] for axis in np.flatnonzero(~pbc & (lengths < 1e-6))]
        if flat:
            raise ValueError(
                f"the cell has zero volume: give the non-periodic axis {flat[0]} a length "
                f"with vacuum, e.g. atoms.center(vacuum=6.0, axis={AXES.index(flat[0])})"
            )
        raise ValueError(
            f"the cell has zero volume (its vectors are linearly dependent): {cell.tolist()}"
        )
    scaled = np.linalg.solve(cell.T, atoms.positions.T).T  # (n, 3)
    for axis in np.flatnonzero(~pbc):
        outside = np.flatnonzero((scaled[:, axis] < 0) | (scaled[:, axis] > 1))
        if outside.size:
            raise ValueError(
                f"atom {outside[0]} lies outside the cell along {AXES[axis]}, which is not "
                f"periodic: atoms.center(vacuum=..., axis={axis}) puts every atom inside"
            )
    # ase.neighborlist brings SciPy's sparse graphs: imported on use, not with the presets
    from ase.neighborlist import neighbor_list

    first, second, distance = neighbor_list("ijd", atoms, min_distance)
    if len(distance):
        pair = np.argmin(distance)
        i, j = int(first[pair]), int(second[pair])
        what = (
            f"atom {i} is {distance[pair]:.3f} Å from its own periodic image"
            if i == j
            else (f"atoms {min(i, j)} and {max(i, j)} are {distance[pair]:.3f} Å apart")
        )
        raise ValueError(
            f"{what} (minimum image, below {min_distance} Å): check the cell and positions"
        )
