r"""The positions an optimizer sees for atoms or an ASE cell filter, as atoms and a cell.

ASE's cell filters present ``(n + 3, 3)`` generalized positions: the atoms' positions
``X`` in the undeformed cell, then the cell's deformation gradient ``F`` (the cell is
``C = C_0 F^T`` and the atoms sit at ``r = X F^T``), as ``c F`` for
:class:`ase.filters.UnitCellFilter` (and :class:`ase.filters.ExpCellFilter`, with
``c = 1``) and as ``c' \log(c F)`` for :class:`ase.filters.FrechetCellFilter`
(``c = n``, ``c'`` its ``exp_cell_factor``); their forces are the gradients in these
coordinates, the virial included (for the Fréchet filter exactly, through the
Fréchet derivative of the matrix exponential). :class:`GeneralizedCoordinates` maps
them to positions and cell differentiably (``torch``), so a model of atoms in a cell
has a gradient and a Hessian in the coordinates the optimizer moves.
"""

import numpy as np
import torch
from ase import Atoms
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter, UnitCellFilter


class GeneralizedCoordinates:
    """The map from an optimizer's positions (N, 3) to atoms' positions and a cell.

    Build it with :meth:`from_optimizable`.

    Attributes
    ----------
    atoms : ase.Atoms
        The atoms (numbers, ``pbc``, constraints) behind the positions.
    n_atoms, rows : int
        ``n`` and ``N`` (``n`` for atoms, ``n + 3`` for a cell filter).
    has_cell : bool
        The last three rows are the cell's deformation.
    frame : array (3, 3)
        The cell the atoms' rows are expressed in: the cell of the atoms, or a
        filter's undeformed cell ``C_0`` (completed along non-periodic axes).
    strain_scale : float
        ``c`` with a strain ``epsilon`` moving the cell rows by about ``c epsilon``
        (``exp_cell_factor`` of the Fréchet filter, ``cell_factor`` of the others).
    fixed : array of int
        Atoms held by :class:`ase.constraints.FixAtoms`.
    """

    def __init__(self, atoms, filter_object=None):
        self.atoms = atoms
        self.n_atoms = len(atoms)
        self.filter_object = filter_object
        self.has_cell = filter_object is not None
        self.rows = self.n_atoms + (3 if self.has_cell else 0)
        self.fixed = np.unique(
            np.concatenate(
                [
                    np.asarray(c.get_indices(), dtype=int)
                    for c in atoms.constraints
                    if isinstance(c, FixAtoms)
                ]
                or [np.zeros(0, dtype=int)]
            )
        )
        self.pbc = np.asarray(atoms.pbc, dtype=bool)
        if self.has_cell:
            self._frechet = isinstance(filter_object, FrechetCellFilter)
            self.cell_factor = float(filter_object.cell_factor)
            self.exp_cell_factor = float(getattr(filter_object, "exp_cell_factor", 1.0))
            self.mask = np.array(filter_object.mask, dtype=np.float64)  # (3, 3)
            self.pressure = float(filter_object.scalar_pressure)
            reference = Atoms(cell=filter_object.orig_cell, pbc=atoms.pbc)
            self.strain_scale = self.exp_cell_factor if self._frechet else self.cell_factor
        else:
            reference = atoms
            self.pressure, self.strain_scale = 0.0, 1.0
        self.frame = np.array(reference.cell.complete())
        if abs(np.linalg.det(self.frame)) < 1e-9:
            raise ValueError("the cell has zero volume: give every lattice vector a length")

    @classmethod
    def from_optimizable(cls, system):
        """The coordinates of ``system``: :class:`ase.Atoms`, a
        :class:`ase.filters.FrechetCellFilter` or a :class:`ase.filters.UnitCellFilter`
        (:class:`ase.filters.ExpCellFilter` included)."""
        if isinstance(system, Atoms):
            return cls(system)
        if isinstance(system, UnitCellFilter):
            return cls(system.atoms, system)
        raise ValueError(
            f"{type(system).__name__} is not supported: pass Atoms, a FrechetCellFilter or a "
            "UnitCellFilter"
        )

    def positions_and_cell(self, positions):
        """Atoms' positions (b, n, 3) and cells (b, 3, 3) of generalized positions
        (b, N, 3), differentiable."""
        q = torch.as_tensor(positions, dtype=torch.float64)
        frame = torch.as_tensor(self.frame)
        if not self.has_cell:
            return q, frame.expand(len(q), 3, 3)
        n = self.n_atoms
        block = q[:, n:]  # (b, 3, 3)
        if self._frechet:
            block = torch.linalg.matrix_exp(block / self.exp_cell_factor)
        gradient = block / self.cell_factor  # F, (b, 3, 3)
        identity = torch.eye(3, dtype=torch.float64)
        deformation = identity + (gradient - identity).transpose(-1, -2) * torch.as_tensor(
            self.mask
        )  # (b, 3, 3)
        return q[:, :n] @ deformation, frame @ deformation

    def volume(self, cell):
        """Volumes (b,) of cells (b, 3, 3)."""
        return torch.linalg.det(cell).abs()

    def configuration(self, positions):
        """A copy of the atoms (constraints removed) at generalized positions (N, 3)."""
        r, cell = self.positions_and_cell(np.asarray(positions, dtype=np.float64)[None])
        atoms = self.atoms.copy()
        atoms.constraints = []
        if self.has_cell:
            atoms.set_cell(cell[0].numpy(), scale_atoms=False)
        atoms.positions = r[0].numpy()
        return atoms

    def atoms_forces(self, positions, forces):
        """The atoms' forces (n, 3) behind generalized ``forces`` (N, 3) at generalized
        ``positions`` (N, 3): a filter returns them times the deformation gradient."""
        forces = np.asarray(forces, dtype=np.float64)
        if not self.has_cell:
            return forces.copy()
        _, cell = self.positions_and_cell(np.asarray(positions, dtype=np.float64)[None])
        deformation = np.linalg.solve(self.frame, cell[0].numpy())  # cell = frame @ D
        # a filter's atom rows are f D^T
        return np.linalg.solve(deformation, forces[: self.n_atoms].T).T

    def free(self):
        """Boolean mask (N, 3) of the coordinates the optimizer moves: all but those of
        atoms held by :class:`ase.constraints.FixAtoms` and the cell entries a filter's
        ``mask`` holds."""
        free = np.ones((self.rows, 3), dtype=bool)
        free[self.fixed] = False
        if self.has_cell:
            free[self.n_atoms :] = self.mask != 0
        return free

    def cell_projectors(self):
        """Projectors (9, 9) onto the moves of the cell rows (3, 3) that the filter's
        ``hydrostatic_strain`` (multiples of the identity: the cell keeps its shape) and
        ``constant_volume`` (traceless: the Fréchet filter's logarithm keeps the volume)
        allow; none for atoms or a filter without them."""
        if not self.has_cell:
            return []
        identity = np.eye(3).ravel() / np.sqrt(3.0)  # (9,), unit
        uniform = np.outer(identity, identity)
        projectors = []
        if self.filter_object.hydrostatic_strain:
            projectors.append(uniform)
        if self.filter_object.constant_volume:
            projectors.append(np.eye(9) - uniform)
        return projectors

    def record(self):
        """What a restart file keeps of a cell filter's coordinates, None for atoms: the
        filter's kind, undeformed cell, factors, mask, pressure, ``hydrostatic_strain``
        and ``constant_volume`` (:func:`resume_filter`)."""
        if not self.has_cell:
            return None
        return {
            "filter": type(self.filter_object).__name__,
            "reference_cell": np.array(self.filter_object.orig_cell, dtype=np.float64),
            "cell_factor": self.cell_factor,
            "exp_cell_factor": self.exp_cell_factor,
            "mask": self.mask,
            "pressure": self.pressure,
            "hydrostatic_strain": bool(self.filter_object.hydrostatic_strain),
            "constant_volume": bool(self.filter_object.constant_volume),
        }

    def new_filter(self, atoms):
        """``atoms`` under a filter of the same kind and undeformed cell as this one's
        (or ``atoms`` itself without a filter)."""
        if not self.has_cell:
            return atoms
        source = self.filter_object
        options = {
            "mask": self.mask,
            "hydrostatic_strain": source.hydrostatic_strain,
            "constant_volume": source.constant_volume,
            "scalar_pressure": source.scalar_pressure,
        }
        if self._frechet:
            options["exp_cell_factor"] = self.exp_cell_factor
        elif type(source) is UnitCellFilter:
            options["cell_factor"] = self.cell_factor
        copy = type(source)(atoms, **options)
        copy.orig_cell = source.orig_cell
        return copy


def resume_filter(system, record):
    """Give the cell filter ``system`` the undeformed cell of ``record`` (of
    :meth:`GeneralizedCoordinates.record`, read from a restart file).

    A filter's positions are relative to its undeformed cell, and a filter built again
    on the atoms of a later configuration (the last frame of a trajectory) starts from
    that configuration's cell: given the cell of the run it resumes, its positions are
    those of the observations it resumes from.

    Parameters
    ----------
    system : ase.Atoms or cell filter
    record : dict or None
        None (a run of atoms, or a restart file that predates the record) changes
        nothing.

    Raises
    ------
    ValueError
        Where ``system`` is not a filter of the same kind, factors, mask, pressure,
        ``hydrostatic_strain`` and ``constant_volume`` (a record without the last two
        was made without them).
    """
    if record is None:
        return
    if not isinstance(system, UnitCellFilter):
        raise ValueError(
            f"its observations were made through a {record['filter']}, and these atoms are "
            "given without a filter: pass them through the same filter to resume"
        )
    current = GeneralizedCoordinates.from_optimizable(system).record()
    stored = {"hydrostatic_strain": False, "constant_volume": False, **record}
    differ = [
        name
        for name in current
        if name != "reference_cell"
        and not np.array_equal(np.asarray(current[name]), np.asarray(stored[name]))
    ]
    if differ:
        raise ValueError(
            f"its observations were made through a {record['filter']} whose "
            f"{', '.join(differ)} differ from this {current['filter']}'s: pass the same "
            "filter options to resume"
        )
    system.orig_cell = np.array(record["reference_cell"], dtype=np.float64)
