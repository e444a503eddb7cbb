"""The point-group symmetry of a molecule, and the displacements that break it.

Where a configuration is mapped onto itself by an orthogonal map ``R`` about its
centroid that permutes like atoms, the energy is invariant under the map, and its
gradient is too: it has no component that breaks the symmetry (the displacements
outside the totally symmetric representation; E. B. Wilson, J. C. Decius and
P. C. Cross, *Molecular Vibrations*, McGraw-Hill (1955), ch. 5). An optimizer that
steps along gradients, or along a model fitted to them, keeps every configuration as
symmetric as the start: it may end on a saddle whose downhill mode breaks the
symmetry (a methyl rotor started eclipsed, a flat amine), and its observations say
nothing of the curvature along such modes. :func:`symmetry_operations` finds the
maps, :func:`is_symmetric` tests other configurations for the same permutations,
:func:`symmetry_breaking_basis` spans the displacements they do not keep, and
:func:`held_symmetry` finds the symmetry a whole run kept and its softest breaking mode.
"""

from dataclasses import dataclass

import numpy as np

TOLERANCE = 1e-3  # Å: an atom's largest distance from its image under a symmetry
LINE = 1e-3  # Å: an atom this close to the line through the centroid and another lies on it
# |G d - d| for a unit displacement d below which a map keeps it: maps found within
# TOLERANCE leave a kept one about 1e-6 off, and a turn of order k moves one it does
# not keep by at least 2 sin(pi / k), 0.5 for k = 12
KEPT = 0.1


def symmetry_operations(positions, numbers, tolerance=TOLERANCE):
    """The orthogonal maps about the centroid that map ``positions`` onto themselves.

    The identity is left out. A finite molecule's maps fix its centroid and carry
    each atom to a like atom at the same distance from it, so two atoms ``a``, ``b``
    not in line with the centroid fix a map by their images ``a'``, ``b'``: one proper
    and one improper map per pair of images at the distance of ``a`` and ``b``. The
    candidates are tried on every atom. For a linear molecule, whose group is
    infinite, a quarter turn about the axis, a mirror through it and the inversion
    (where it holds) generate a finite group with the same symmetric displacements.

    Parameters
    ----------
    positions : array (n, 3)
        Å.
    numbers : array (n,)
        Atomic numbers, or any labels: only atoms of equal labels are exchanged.
    tolerance : float
        Å, the largest distance of an atom from the image of another.

    Returns
    -------
    list of (array (3, 3), array (n,) of int)
        Each map ``R`` with its permutation: ``R (x_i - c) = x_{p[i]} - c``.
    """
    centred = np.asarray(positions, dtype=np.float64)
    centred = centred - centred.mean(axis=0)  # (n, 3)
    numbers = np.asarray(numbers)
    radii = np.linalg.norm(centred, axis=1)  # (n,)
    off_centre = np.flatnonzero(radii > tolerance)
    if not len(off_centre):
        return []
    shells = [_shell(i, centred, numbers, radii, tolerance) for i in range(len(centred))]
    first = min(off_centre, key=lambda i: len(shells[i]))
    areas = np.linalg.norm(np.cross(centred[first], centred), axis=1)  # (n,)
    planar = np.flatnonzero(areas > LINE * radii[first])  # off the line through ``first``
    if not len(planar):
        candidates = _linear_candidates(centred[first] / radii[first])
    else:
        second = min(planar, key=lambda i: len(shells[i]))
        candidates = _frame_candidates(centred, first, second, shells, tolerance)
    operations = []
    for rotation in candidates:
        permutation = _permutation(rotation, centred, numbers, tolerance)
        if permutation is not None and not np.allclose(rotation, np.eye(3)):
            if not any(np.allclose(rotation, kept) for kept, _ in operations):
                operations.append((rotation, permutation))
    return operations


def is_symmetric(positions, operations, tolerance=TOLERANCE):
    """Whether every permutation of ``operations`` (:func:`symmetry_operations`) is a
    symmetry of ``positions`` (n, 3): some orthogonal map about their centroid carries
    each atom ``i`` to atom ``p[i]`` within ``tolerance`` Å.

    The map is fitted (orthogonal Procrustes: P. H. Schönemann, Psychometrika 31, 1
    (1966)) rather than taken from ``operations``, so a configuration turned or moved
    as a whole keeps the symmetry it has.
    """
    centred = np.asarray(positions, dtype=np.float64)
    centred = centred - centred.mean(axis=0)  # (n, 3)
    for _, permutation in operations:
        images = centred[permutation]  # (n, 3): where each atom must go
        left, _, right = np.linalg.svd(images.T @ centred)
        mapped = centred @ (left @ right).T  # the best orthogonal map, applied
        if np.linalg.norm(mapped - images, axis=1).max() > tolerance:
            return False
    return True


def symmetry_breaking_basis(operations, n):
    """Orthonormal basis (3n, b) of the displacements that ``operations`` do not keep.

    A displacement ``d`` (n, 3) is kept by a map when ``R d_i = d_{p[i]}`` for every
    atom, ``G d = d``; the kept ones are the null space of ``sum (G - I)^T (G - I) =
    sum (2 I - G - G^T)`` over the maps (those of the whole group, or any set
    generating it), and the maps being orthogonal, the rest is the span of its other
    eigenvectors. No operation: (3n, 0).
    """
    if not operations:
        return np.zeros((3 * n, 0))
    gram = np.zeros((3 * n, 3 * n))
    for rotation, permutation in operations:
        acting = np.zeros((3 * n, 3 * n))  # G: d -> (R d_i placed at atom p[i])
        for i, j in enumerate(permutation):
            acting[3 * j : 3 * j + 3, 3 * i : 3 * i + 3] = rotation
        gram += 2.0 * np.eye(3 * n) - acting - acting.T
    values, vectors = np.linalg.eigh(gram)  # ascending
    return vectors[:, values > KEPT**2]  # (3n, b)


@dataclass(frozen=True)
class HeldSymmetry:
    """A symmetry that every configuration of a run kept, and the softest mode breaking it.

    Attributes
    ----------
    order : int
        Elements of the group found, the identity counted (for a linear molecule, its
        finite stand-in's generators and the identity).
    breaking : int
        Free modes, less the rigid motions, that break it.
    mode : array (3n,)
        The unit mode among those of lowest curvature in the Hessian given.
    curvature : float
        That curvature, eV/Å².
    """

    order: int
    breaking: int
    mode: np.ndarray
    curvature: float


def held_symmetry(configurations, labels, projected, basis, tolerance=TOLERANCE):
    """The symmetry of the last of ``configurations`` where all of them keep it, with the
    softest mode of the model's Hessian that breaks it; else None.

    Parameters
    ----------
    configurations : array (m, n, 3)
        Every configuration of a run; the last is where the symmetry is sought.
    labels : array (n,)
        Only atoms of equal labels are exchanged (atomic numbers, with the constraints
        folded in).
    projected : callable
        Directions ``D`` (3n, c) -> ``D^T H D`` (c, c), eV/Å², of the model's Hessian
        ``H`` at the last configuration
        (:meth:`asebo.optimize.model_hessian.ModelCurvature.projected`).
    basis : array (3n, k)
        Orthonormal basis of the free coordinates less the rigid motions.
    tolerance : float
        Å, as in :func:`symmetry_operations`.

    Returns
    -------
    HeldSymmetry or None
    """
    configurations = np.asarray(configurations, dtype=np.float64)
    here = configurations[-1]
    operations = symmetry_operations(here, labels, tolerance)
    if not operations or not all(is_symmetric(c, operations, tolerance) for c in configurations):
        return None
    breaking = symmetry_breaking_basis(operations, len(here))  # (3n, b)
    left, values, _ = np.linalg.svd(basis.T @ breaking, full_matrices=False)  # (k, b)
    within = basis @ left[:, values > 0.5]  # (3n, c): free, not rigid, breaking it
    if not within.shape[1]:
        return None
    curvatures, vectors = np.linalg.eigh(projected(within))  # (c,), (c, c)
    return HeldSymmetry(
        len(operations) + 1, within.shape[1], within @ vectors[:, 0], float(curvatures[0])
    )


def _shell(i, centred, numbers, radii, tolerance):
    """Atoms like ``i`` at its distance from the centroid."""
    return np.flatnonzero((numbers == numbers[i]) & (np.abs(radii - radii[i]) <= tolerance))


def _frame(a, b):
    """Orthonormal frame (3, 3), columns: ``a``'s direction, the part of ``b`` normal to
    it, their normal."""
    u = a / np.linalg.norm(a)
    v = b - (b @ u) * u
    v /= np.linalg.norm(v)
    return np.column_stack([u, v, np.cross(u, v)])


def _frame_candidates(centred, first, second, shells, tolerance):
    """The proper and improper maps carrying ``first`` and ``second`` to each pair of
    like atoms at their distance from each other."""
    reference = _frame(centred[first], centred[second])
    distance = np.linalg.norm(centred[first] - centred[second])
    flip = np.diag([1.0, 1.0, -1.0])
    candidates = []
    for a in shells[first]:
        for b in shells[second]:
            if a == b or abs(np.linalg.norm(centred[a] - centred[b]) - distance) > 2 * tolerance:
                continue
            area = np.linalg.norm(np.cross(centred[a], centred[b]))
            if area <= LINE * np.linalg.norm(centred[a]):
                continue
            image = _frame(centred[a], centred[b])
            candidates += [image @ reference.T, image @ flip @ reference.T]
    return candidates


def _linear_candidates(axis):
    """A quarter turn about ``axis`` (unit), a mirror containing it, and the inversion."""
    normal = np.cross(axis, np.eye(3)[np.argmin(np.abs(axis))])
    normal /= np.linalg.norm(normal)
    across = np.cross(axis, normal)
    quarter = np.outer(axis, axis) + np.outer(across, normal) - np.outer(normal, across)
    mirror = np.eye(3) - 2.0 * np.outer(normal, normal)
    return [quarter, mirror, -np.eye(3)]


def _permutation(rotation, centred, numbers, tolerance):
    """The permutation (n,) with ``rotation`` ``x_i = x_{p[i]}`` for like atoms, or None."""
    images = centred @ rotation.T  # (n, 3)
    distances = np.linalg.norm(images[:, None] - centred[None], axis=2)  # (n, n)
    distances[numbers[:, None] != numbers[None]] = np.inf
    permutation = np.argmin(distances, axis=1)
    if distances[np.arange(len(centred)), permutation].max() > tolerance:
        return None
    if len(np.unique(permutation)) < len(permutation):
        return None
    return permutation
