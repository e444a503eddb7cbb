"""Pyramidal centres that a start holds flat, and the tilt that lets a relaxation leave.

A nitrogen with three bonds and a lone pair is pyramidal unless conjugation flattens
it (VSEPR: Gillespie and Nyholm, Q. Rev. Chem. Soc. 11, 339 (1957)); the same holds
for phosphorus, arsenic and antimony. A start built with such a centre flat in the
plane of its three neighbours (the Baker starts of methylamine and benzidine, say)
is symmetric under the reflection through that plane, the energy is invariant under
it, and so the gradient is too: it has no component out of the plane. Every step
made from gradients keeps the centre flat, and the relaxation ends at the flat
inversion saddle (0.27 eV above the minimum for methylamine with GFN2-xTB) however
many force calls it spends; Sella, geomeTRIC and ASE's optimizers all do.

:func:`flat_centres` finds these centres, leaving out those inside a ring (an
aromatic ring holds its nitrogens flat at the minimum too, and the tilt only costs
calls there) and those that the forces push out of plane (a flat centre without
the mirror plane leaves it by itself, and a tilt of arbitrary sign may send it to
the wrong side), and :func:`tilted` moves each out of the plane along its normal,
so that the forces after the first step tell which way the surface goes.
"""

import numpy as np
from scipy.sparse.csgraph import connected_components

from asebo.model.lindh import BONDED, lindh_weights

PNICTOGENS = (7, 15, 33, 51)  # N, P, As, Sb
FLAT_TOLERANCE = 1e-3  # Å, the centre's largest height over the plane of its neighbours
# eV/Å: an out-of-plane force on the centre, relative to its neighbours, below this is
# the zero of a mirror plane, far from the forces of flat starts without one (the
# forces of both kinds in docs/notes/flat-centres.md)
SYMMETRIC_FORCE = 1e-3
COLLINEAR = 1e-6  # Å², area of the neighbours' triangle (x 2) below which they span no plane


def flat_centres(positions, numbers, free=None, forces=None):
    """Pnictogen centres with three bonded neighbours, flat with them, outside rings,
    that the forces do not push out of plane.

    Parameters
    ----------
    positions : array (n, 3)
        Å.
    numbers : array (n,)
        Atomic numbers.
    free : bool array (n, 3), optional
        Coordinates no constraint holds; a centre with a fixed coordinate is left out.
    forces : array (n, 3), optional
        Forces (eV/Å) at ``positions``. A centre whose out-of-plane force, less the
        mean of its neighbours', exceeds ``SYMMETRIC_FORCE`` is left out: no mirror
        plane holds it, and the forces move it out of plane themselves.

    Returns
    -------
    centres : array (c,) of int
        Atom indices.
    normals : array (c, 3)
        Unit normal of the plane of each centre's neighbours.
    """
    positions = np.asarray(positions, dtype=np.float64)
    bonded = lindh_weights(positions, numbers) > BONDED  # (n, n)
    centres, normals = [], []
    for centre in np.flatnonzero(np.isin(numbers, PNICTOGENS)):
        neighbours = np.flatnonzero(bonded[centre])
        if len(neighbours) != 3 or (free is not None and not np.all(free[centre])):
            continue
        first, second, third = positions[neighbours]
        normal = np.cross(second - first, third - first)
        if np.linalg.norm(normal) < COLLINEAR:
            continue  # neighbours on a line: no plane to leave
        normal /= np.linalg.norm(normal)
        height = abs(np.dot(positions[centre] - first, normal))
        pushed = (
            forces is not None
            and abs((forces[centre] - forces[neighbours].mean(axis=0)) @ normal) > SYMMETRIC_FORCE
        )
        if height < FLAT_TOLERANCE and not pushed and not _in_ring(bonded, centre):
            centres.append(centre)
            normals.append(normal)
    return np.array(centres, dtype=int), np.array(normals).reshape(-1, 3)


def _in_ring(bonded, centre):
    """Whether two neighbours of ``centre`` stay connected without it."""
    others = np.delete(np.arange(len(bonded)), centre)
    _, component = connected_components(bonded[np.ix_(others, others)], directed=False)
    neighbours = np.flatnonzero(bonded[centre, others])
    return len(set(component[neighbours])) < len(neighbours)


def tilted(positions, centres, normals, distance):
    """``positions`` (n, 3) with each of ``centres`` moved ``distance`` Å along its normal."""
    moved = np.array(positions, dtype=np.float64)
    moved[centres] += distance * normals
    return moved
