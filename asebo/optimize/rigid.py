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

RCOND = 1e-10  # relative singular value below which a rigid mode is dropped (linear molecules)
NEGLIGIBLE = 1e-12  # a rigid part this small relative to the forces is round-off


def rigid_modes(positions):
    """Displacements (3n, 6) of the unit translations and the unit rotations about the centroid.

    Column ``a < 3`` moves every atom by the unit vector ``e_a``; column ``3 + a``
    turns the molecule about ``e_a`` through its centroid, ``e_a x (x_i - mean(x))``.

    Parameters
    ----------
    positions : array (n, 3)
    """
    positions = np.asarray(positions, dtype=np.float64)
    centred = positions - positions.mean(axis=0)  # (n, 3)
    translations = np.tile(np.eye(3), (len(positions), 1))  # (3n, 3)
    rotations = np.stack([np.cross(axis, centred).ravel() for axis in np.eye(3)], axis=1)  # (3n, 3)
    return np.hstack([translations, rotations])


def rigid_motion(positions, forces):
    """Velocity ``v`` (3,) and angular velocity ``omega`` (3,) of the rigid part of ``forces``.

    The rigid part is the least-squares fit ``f_i = v + omega x (x_i - mean(x))``;
    about the axis of a linear molecule, which turns no atom, ``omega`` has no
    component.

    Parameters
    ----------
    positions, forces : array (n, 3)
    """
    coefficients = np.linalg.lstsq(
        rigid_modes(positions), np.asarray(forces, dtype=np.float64).ravel(), rcond=RCOND
    )[0]  # (6,)
    return coefficients[:3], coefficients[3:]


def rigid_part(positions, forces):
    """The part (n, 3) of ``forces`` (n, 3) that translates or rotates the molecule at
    ``positions`` (n, 3) as a whole: zero for the forces of an invariant energy."""
    velocity, angular = rigid_motion(positions, forces)
    return (rigid_modes(positions) @ np.concatenate([velocity, angular])).reshape(-1, 3)


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
