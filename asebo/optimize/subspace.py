"""The displacements ASE's linear constraints allow, as an orthonormal basis.

Most constraints hold whole coordinates: :class:`ase.constraints.FixAtoms`,
:class:`ase.constraints.FixCartesian`, and :class:`ase.constraints.FixedPlane` or
:class:`ase.constraints.FixedLine` along a Cartesian axis (:func:`held_axes`), and a
cell filter's ``mask``; the optimizer's boolean mask of free coordinates says it all.
Others allow a linear subspace of the free coordinates: :class:`ase.constraints.FixSymmetry`
(the displacements and cell deformations its space group keeps), a plane or line
along another direction, and a cell filter's ``hydrostatic_strain`` or
``constant_volume`` (:meth:`asebo.model.cell_coordinates.GeneralizedCoordinates.cell_projectors`).
:func:`free_subspace` gives the intersection of all of them as a
:class:`FreeSubspace`, onto which the forces of the convergence test are projected;
:func:`search_subspace` the moves of the search, which also keep a cell filter's
deformation symmetric (:func:`unturned_cell_projector`).
"""

import numpy as np
import torch
from ase.constraints import FixCartesian, FixedLine, FixedPlane, FixSymmetry
from ase.spacegroup.symmetrize import symmetrize_rank2

from asebo.model.cell_coordinates import GeneralizedCoordinates

NULL_EIGENVALUE = 1e-6
"""Eigenvalues of the summed complements below this span the allowed subspace."""


class FreeSubspace:
    """The displacements (N, 3) a run may make: ``basis`` (3N, k), orthonormal columns.

    Parameters
    ----------
    basis : array (3N, k)
    """

    def __init__(self, basis):
        self.basis = np.asarray(basis, dtype=np.float64)
        self._tensor = torch.as_tensor(self.basis)

    @property
    def dimension(self):
        """``k``, the number of independent displacements."""
        return self.basis.shape[1]

    def project(self, vectors):
        """The orthogonal projection of ``vectors`` (..., N, 3) onto the subspace (NumPy)."""
        vectors = np.asarray(vectors, dtype=np.float64)
        flat = vectors.reshape(*vectors.shape[:-2], -1)  # (..., 3N)
        return ((flat @ self.basis) @ self.basis.T).reshape(vectors.shape)

    def project_flat(self, vectors):
        """The projection of flattened displacements (..., 3N), a tensor (differentiable)."""
        return (vectors @ self._tensor) @ self._tensor.T


def held_axes(constraint):
    """Boolean (3,) of the Cartesian axes that ``constraint`` holds for its atoms, where
    it holds whole axes (FixCartesian; FixedPlane or FixedLine along an axis); else None."""
    if isinstance(constraint, (FixedPlane, FixedLine)):
        direction = np.abs(np.asarray(constraint.dir, dtype=np.float64))
        if not np.isclose(direction.max(), 1.0, rtol=0.0, atol=1e-12):
            return None
        along = direction > 0.5
        return along if isinstance(constraint, FixedPlane) else ~along
    if isinstance(constraint, FixCartesian):
        return np.asarray(constraint.mask, dtype=bool)
    return None


def free_coordinates(coordinates):
    """Boolean mask (N, 3) of the coordinates no constraint of ``coordinates`` (nor a
    filter's mask) holds whole: FixAtoms, FixCartesian, FixedPlane and FixedLine along
    an axis."""
    free = coordinates.free()  # FixAtoms, the filter's mask
    for constraint in coordinates.atoms.constraints:
        held = held_axes(constraint)
        if held is not None:
            free[constraint.index] &= ~held
    return free


def held_coordinates(coordinates, positions):
    """Where the constraints of ``coordinates`` hold a run at its generalized
    ``positions`` (N, 3), as :func:`asebo.optimize.observations.held_elsewhere` takes
    them (a dict): the free coordinates (:func:`free_coordinates`), the cell the atoms'
    rows are Cartesian in, pbc, the subspace the other constraints allow
    (:func:`free_subspace`) and the number of atom rows."""
    free = free_coordinates(coordinates)
    return {
        "positions": np.asarray(positions, dtype=np.float64),
        "free": free,
        "cell": coordinates.frame,
        "pbc": coordinates.pbc,
        "subspace": free_subspace(coordinates, free),
        "atom_rows": coordinates.n_atoms,
    }


def free_atoms(atoms):
    """Boolean mask (n, 3) of the coordinates of ``atoms`` (ase.Atoms) no constraint
    holds whole (:func:`free_coordinates`): the band's and the saddle search's."""
    return free_coordinates(GeneralizedCoordinates.from_optimizable(atoms))


def free_subspace(coordinates, free):
    """The displacements the constraints of ``coordinates`` allow within ``free``.

    Parameters
    ----------
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates
    free : bool array (N, 3)
        The coordinates no constraint holds whole.

    Returns
    -------
    FreeSubspace or None
        None where no constraint allows less than the free coordinates.
    """
    return _intersection(_constraint_projectors(coordinates), free, coordinates.rows)


def search_subspace(coordinates, free):
    """The displacements the search makes: those of :func:`free_subspace`, with a cell
    filter's deformation kept symmetric where its mask allows
    (:func:`unturned_cell_projector`).

    Parameters
    ----------
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates
    free : bool array (N, 3)
        The coordinates no constraint holds whole.

    Returns
    -------
    FreeSubspace or None
        None where the search moves every free coordinate.
    """
    projectors = _constraint_projectors(coordinates)
    unturned = unturned_cell_projector(coordinates)
    if unturned is not None:
        projectors.append(unturned)
    return _intersection(projectors, free, coordinates.rows)


def unturned_cell_projector(coordinates):
    """The projector (3N, 3N) onto the moves whose cell rows, a filter's deformation
    gradient ``F`` (or its logarithm), change by a symmetric matrix; None without a
    filter, or with a ``mask`` that holds an entry of ``F`` but not its transpose.

    The energy does not change where cell and atoms turn together, ``F -> R F``: such
    a turn adds ``W F`` to ``F`` (``W`` antisymmetric), which only at ``F = 1`` is the
    antisymmetric part the periodic model leaves out
    (:func:`asebo.model.periodic.described_basis`). A search free to move the
    antisymmetric part turns the cell where the model sees no change, and the model
    then no longer fits the forces: four sheared copper atoms under a ``UnitCellFilter``
    ran 120 steps unconverged, their cell forces stuck near 0.04 eV/Å. A symmetric
    ``F`` is the polar decomposition's stretch (every shape of the cell, unturned),
    and the model describes every move within it.
    """
    if not coordinates.has_cell or not np.array_equal(coordinates.mask, coordinates.mask.T):
        return None
    symmetric = np.eye(9).reshape(3, 3, 3, 3)
    symmetric = 0.5 * (symmetric + symmetric.transpose(1, 0, 2, 3))
    size, n = 3 * coordinates.rows, coordinates.n_atoms
    return _embedded(symmetric.reshape(9, 9), slice(3 * n, size), size)


def _intersection(projectors, free, rows):
    """The :class:`FreeSubspace` that every projector (3N, 3N) of ``projectors`` and the
    boolean mask ``free`` (N, 3) allow; None without projectors."""
    if not projectors:
        return None
    size = 3 * rows
    complement = np.diag((~np.asarray(free, dtype=bool)).ravel().astype(np.float64))
    for projector in projectors:
        rest = np.eye(size) - projector
        complement += rest.T @ rest
    values, vectors = np.linalg.eigh(complement)
    return FreeSubspace(vectors[:, values < NULL_EIGENVALUE])


def _constraint_projectors(coordinates):
    """Projectors (3N, 3N) of the constraints that allow a subspace, not whole axes."""
    size, n = 3 * coordinates.rows, coordinates.n_atoms
    projectors = []
    for block in coordinates.cell_projectors():
        projectors.append(_embedded(block, slice(3 * n, size), size))
    for constraint in coordinates.atoms.constraints:
        if isinstance(constraint, FixSymmetry):
            projectors.extend(_symmetry_projectors(constraint, coordinates))
        elif isinstance(constraint, (FixedPlane, FixedLine)) and held_axes(constraint) is None:
            projectors.append(_direction_projector(constraint, coordinates.rows))
    return projectors


def _embedded(block, where, size):
    """The projector (size, size) that is ``block`` on the indices ``where`` and the
    identity elsewhere."""
    projector = np.eye(size)
    projector[where, where] = block
    return projector


def _direction_projector(constraint, rows):
    """The projector (3N, 3N) of a FixedPlane (the plane normal to its direction) or a
    FixedLine (its direction) on its atoms."""
    direction = np.asarray(constraint.dir, dtype=np.float64)
    along = np.outer(direction, direction)
    block = np.eye(3) - along if isinstance(constraint, FixedPlane) else along
    projector = np.eye(3 * rows).reshape(rows, 3, rows, 3)
    for index in np.atleast_1d(constraint.index):
        projector[index, :, index, :] = block
    return projector.reshape(3 * rows, 3 * rows)


def _symmetry_projectors(constraint, coordinates):
    """The projectors (3N, 3N) of FixSymmetry: the atoms' displacements its space group
    keeps (where it adjusts positions), and the cell deformations (where it adjusts
    the cell and a filter moves it)."""
    size, n = 3 * coordinates.rows, coordinates.n_atoms
    lattice = coordinates.frame  # the atoms' rows are Cartesian in this cell
    projectors = []
    if constraint.do_adjust_positions:
        atoms = _rank1_projector(lattice, constraint.rotations, constraint.symm_map)
        projectors.append(_embedded(atoms, slice(0, 3 * n), size))
    if constraint.do_adjust_cell and coordinates.has_cell:
        cell = _rank2_projector(lattice, constraint.rotations)
        projectors.append(_embedded(cell, slice(3 * n, size), size))
    return projectors


def _rank1_projector(lattice, rotations, symmetry_maps):
    """The symmetrisation (3n, 3n) of displacements (n, 3) as ASE's ``symmetrize_rank1``
    does it: each operation's Cartesian rotation carries atom ``i`` to ``map[i]``."""
    inverse = np.linalg.inv(lattice)
    n = len(symmetry_maps[0])
    projector = np.zeros((n, 3, n, 3))
    atoms = np.arange(n)
    for rotation, mapping in zip(rotations, symmetry_maps):
        cartesian = lattice.T @ rotation @ inverse.T  # (3, 3)
        projector[np.asarray(mapping), :, atoms, :] += cartesian
    return projector.reshape(3 * n, 3 * n) / len(rotations)


def _rank2_projector(lattice, rotations):
    """The symmetrisation (9, 9) of a cell deformation (3, 3), as ASE's
    ``symmetrize_rank2`` symmetrises a stress."""
    inverse = np.linalg.inv(lattice)
    columns = [
        symmetrize_rank2(lattice, inverse, unit.reshape(3, 3), rotations).ravel()
        for unit in np.eye(9)
    ]
    return np.array(columns).T
