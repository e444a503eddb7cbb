"""The rigid-motion part of a molecule's forces, and a step of the whole molecule along it.

The energy of an isolated molecule does not change when it is translated or rotated,
so its forces carry no net force and no torque. A calculator on a real-space grid
breaks that invariance a little (the egg-box effect): for water in GPAW at
``h = 0.2`` Å its forces keep a torque of a few hundredths of an eV/Å. A
rotation-invariant model cannot represent that part, and no change of the
molecule's shape removes it. :func:`rigid_part` separates it from the forces,
:func:`rigid_step` is a step along it and :func:`moved_rigidly` takes that step
without changing the molecule's shape.
"""

import numpy as np
from scipy.spatial.transform import Rotation

from asebo.optimize.settings import SpecialCases, TrustSettings

RCOND = 1e-10  # relative singular value below which a rigid mode is dropped (one atom)
NEGLIGIBLE = 1e-12  # a rigid part this small relative to the forces is round-off
LINEAR = 1e-2
"""Largest spread of a linear molecule's atoms across its line, relative to the spread
along it (:func:`is_linear`). A relaxed linear molecule is bent by the forces left
at convergence over its bend's stiffness, soft for a long chain: a relative
tolerance of round-off, or of 1e-3, takes some relaxed ones for bent, whose bend
across the plane of the residual bend then turns as their rotation about the line
and is lost as a vibration. 1e-2 is a symmetric triatomic bent by 2°, well below
the bends of bent molecules."""


def is_linear(positions):
    """Whether the atoms at ``positions`` (n, 3) lie on a line, within :data:`LINEAR`:
    the second singular value of the centred positions below ``LINEAR`` times the
    first. Two atoms are; one atom is not (it has no line)."""
    centred = np.asarray(positions, dtype=np.float64) - np.mean(positions, axis=0)  # (n, 3)
    spreads = np.linalg.svd(centred, compute_uv=False)  # (3,) or fewer
    return len(centred) > 1 and spreads[0] > 0 and spreads[1] <= LINEAR * spreads[0]


def rotation_axes(positions):
    """Unit axes (r, 3) of the rotations that are rigid motions of the atoms at
    ``positions`` (n, 3): the Cartesian axes, or for a linear molecule
    (:func:`is_linear`) the two principal axes across its line; the rotation about
    the line turns no atom of a straight molecule, and a relaxed one's residual bend
    is a vibration."""
    if not is_linear(positions):
        return np.eye(3)
    centred = np.asarray(positions, dtype=np.float64) - np.mean(positions, axis=0)  # (n, 3)
    return np.linalg.svd(centred, full_matrices=True)[2][1:]  # (2, 3)


def rigid_modes(positions):
    """Displacements (3n, 3 + r) of the unit translations and the unit rotations about
    the centroid.

    Column ``a < 3`` moves every atom by the unit vector ``e_a``; column ``3 + b``
    turns the molecule about the ``b``-th of :func:`rotation_axes` (``u``) through its
    centroid, ``u x (x_i - mean(x))``: three rotations, two for a linear molecule.

    Parameters
    ----------
    positions : array (n, 3)
    """
    positions = np.asarray(positions, dtype=np.float64)
    centred = positions - positions.mean(axis=0)  # (n, 3)
    translations = np.tile(np.eye(3), (len(positions), 1))  # (3n, 3)
    axes = rotation_axes(positions)  # (r, 3)
    rotations = np.stack([np.cross(axis, centred).ravel() for axis in axes], axis=1)  # (3n, r)
    return np.hstack([translations, rotations])


def rigid_motion(positions, forces):
    """Velocity ``v`` (3,) and angular velocity ``omega`` (3,) of the rigid part of ``forces``.

    The rigid part is the least-squares fit ``f_i = v + omega x (x_i - mean(x))``
    with ``omega`` along :func:`rotation_axes`: for a linear molecule, ``omega`` has
    no component along its line (a force across a nearly straight molecule bends it).

    Parameters
    ----------
    positions, forces : array (n, 3)
    """
    coefficients = np.linalg.lstsq(
        rigid_modes(positions), np.asarray(forces, dtype=np.float64).ravel(), rcond=RCOND
    )[0]  # (3 + r,)
    return coefficients[:3], coefficients[3:] @ rotation_axes(positions)


def rigid_part(positions, forces):
    """The part (n, 3) of ``forces`` (n, 3) that translates or rotates the molecule at
    ``positions`` (n, 3) as a whole: zero for the forces of an invariant energy."""
    positions = np.asarray(positions, dtype=np.float64)
    velocity, angular = rigid_motion(positions, forces)
    return velocity + np.cross(angular, positions - positions.mean(axis=0))


def rigid_step(positions, forces, length):
    """Translation (3,) and rotation vector (3,) of a step along the rigid part of ``forces``.

    The step is ``s v`` and ``s omega`` (:func:`rigid_motion` of ``positions`` (n, 3)
    and ``forces`` (n, 3)), with ``s`` such that the largest atomic displacement to
    first order, ``s |v + omega x c_i|``, is ``length`` Å; to first order the energy
    falls by ``s |rigid part|^2``.

    Raises
    ------
    ValueError
        When the forces have no rigid part beyond round-off.
    """
    positions = np.asarray(positions, dtype=np.float64)
    velocity, angular = rigid_motion(positions, forces)
    field = velocity + np.cross(angular, positions - positions.mean(axis=0))  # (n, 3)
    largest = np.linalg.norm(field, axis=1).max()
    if largest <= NEGLIGIBLE * np.abs(forces).max():
        raise ValueError("the forces have no net force or torque to move the molecule along")
    scale = length / largest
    return scale * velocity, scale * angular


def moved_rigidly(positions, translation, rotation):
    """``positions`` (n, 3) turned about their centroid by the rotation vector
    ``rotation`` (3,) and shifted by ``translation`` (3,): every interatomic distance
    is kept."""
    positions = np.asarray(positions, dtype=np.float64)
    centroid = positions.mean(axis=0)
    return centroid + translation + Rotation.from_rotvec(rotation).apply(positions - centroid)


def rigid_move_length(energies):
    """Å, the largest atomic move of a rigid move after a row of calls whose
    ``energies`` (k,) are given in the order computed: the default ``force_step`` of
    :class:`asebo.optimize.settings.TrustSettings`, times ``rigid_shrink`` of
    :class:`asebo.optimize.settings.SpecialCases` for every call after the lowest.
    While each move lowers the energy the step keeps its length; a move that overshoots
    a grid's ripple halves it."""
    halvings = len(energies) - 1 - int(np.argmin(energies))
    return TrustSettings().force_step * SpecialCases().rigid_shrink ** halvings
