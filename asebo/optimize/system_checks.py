"""The checks of what :class:`asebo.BOOptimizer` is given, each a one-line error that
says what to do, raised before any calculator call."""

import os

import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixAtoms, FixCartesian, FixedLine, FixedPlane, FixSymmetry
from ase.filters import FrechetCellFilter, UnitCellFilter
from ase.neighborlist import neighbor_list

from asebo.model.cell_coordinates import GeneralizedCoordinates, resume_filter
from asebo.model.springs import CLOSEST_APPROACH
from asebo.optimize.observations import RestartError

SUPPORTED_CONSTRAINTS = (FixAtoms, FixCartesian, FixedPlane, FixedLine, FixSymmetry)
FILTER_CONSTRAINTS = (FixAtoms, FixSymmetry)  # those a cell filter's coordinates can honour


def check_writable(name, path):
    """Refuse a file path that cannot be written, before any calculator call."""
    if path is None or hasattr(path, "write"):
        return
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{name} {path!r} is a folder: pass a file name inside it")
    if not os.path.isdir(folder):
        raise ValueError(f"{name} {path!r}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise PermissionError(
            f"{name} {path!r} cannot be written: choose a file in a folder you can write to"
        )


def check_computes(calc, who):
    """Raise ValueError where ``calc`` is ASE's :class:`SinglePointCalculator`: the
    results read from a file, which compute nothing at a new configuration."""
    if isinstance(calc, SinglePointCalculator):
        raise ValueError(
            f"{who} needs a calculator that computes: the atoms hold a "
            "SinglePointCalculator, the results read from a file; attach one first, "
            "e.g. atoms.calc = calculators.get_calculator('gfn2')"
        )


def check_distinct_files(**named_paths):
    """Refuse two of a run's files that are one file, before any call.

    Parameters
    ----------
    **named_paths : str, os.PathLike, None or open file
        Each file of the run by the name the user gave it (``restart``, ``logfile``,
        ``trajectory``; ``--output`` in a command). None, an open file and ``'-'``
        (standard output) name no file and are passed over.

    Raises
    ------
    ValueError
        Naming the first two arguments that are the same file: the same path once
        resolved (links, ``..``, a relative and an absolute name), or one file under
        two names (a hard link).
    """
    named = [
        (name, os.fspath(path))
        for name, path in named_paths.items()
        if isinstance(path, (str, os.PathLike)) and os.fspath(path) != "-"
    ]
    for k, (first, first_path) in enumerate(named):
        for second, second_path in named[k + 1 :]:
            if _same_file(first_path, second_path):
                raise ValueError(
                    f"{first} {first_path!r} and {second} {second_path!r} are the same file: "
                    "give each its own name"
                )


def _same_file(first, second):
    """Whether the paths ``first`` and ``second`` name one file, existing or not."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist yet
        return False


def periodic_note(coordinates, representation, prior):
    """The log line that says how a periodic system is modelled."""
    what = (
        f"{type(coordinates.filter_object).__name__} (positions and cell)"
        if coordinates.has_cell
        else "periodic cell"
    )
    return f"{what}: kernel '{representation.name}', prior {prior.label}"


def resume_system(system, stored, restart):
    """The coordinates of ``system``, a cell filter given the undeformed cell of the run
    that the restart file's content ``stored`` holds
    (:func:`asebo.model.cell_coordinates.resume_filter`)."""
    try:
        resume_filter(system, stored.get("cell_filter"))
    except ValueError as error:
        raise RestartError(
            f"restart file {restart} cannot be resumed: {error}; or pass another restart "
            "file name to start afresh (this one was left untouched)"
        ) from error
    return GeneralizedCoordinates.from_optimizable(system)


def check_system(system):
    """The :class:`asebo.model.cell_coordinates.GeneralizedCoordinates` of ``system``;
    a one-line error for what the optimizer cannot relax, before any call."""
    if isinstance(system, UnitCellFilter):  # FrechetCellFilter, ExpCellFilter too
        atoms = system.atoms
        if system.constant_volume and not isinstance(system, FrechetCellFilter):
            raise ValueError(
                f"BOOptimizer keeps the volume of constant_volume exactly only through "
                f"FrechetCellFilter (traceless moves of its logarithm), not "
                f"{type(system).__name__}: use FrechetCellFilter(atoms, constant_volume=True)"
            )
    elif isinstance(system, Atoms):
        atoms = system
    else:
        raise TypeError(
            f"BOOptimizer relaxes an ase.Atoms or a cell filter (FrechetCellFilter, "
            f"UnitCellFilter, ExpCellFilter), got {type(system).__name__}: use one of "
            "these, or an ASE optimizer such as BFGS"
        )
    filtered = atoms is not system
    if atoms.calc is None:
        raise ValueError(
            "BOOptimizer needs a calculator: attach one first, "
            "e.g. atoms.calc = calculators.get_calculator('gfn2')"
        )
    check_computes(atoms.calc, "BOOptimizer")
    if len(atoms) == 0:
        raise ValueError("no atoms: there is nothing to optimize; give one atom or more")
    check_constraints(atoms, filtered)
    check_finite(atoms, filtered or np.any(atoms.pbc))
    if filtered or np.any(atoms.pbc):
        check_cell(atoms, filtered)
    else:
        check_closest_approach(atoms)
    return GeneralizedCoordinates.from_optimizable(system)


def check_constraints(atoms, filtered):
    """Refuse a constraint the search cannot honour: with a cell filter (``filtered``),
    any but those of :data:`FILTER_CONSTRAINTS`; else any but those of
    :data:`SUPPORTED_CONSTRAINTS`."""
    supported = FILTER_CONSTRAINTS if filtered else SUPPORTED_CONSTRAINTS
    for constraint in atoms.constraints:
        if not isinstance(constraint, supported):
            if filtered:
                raise TypeError(
                    f"BOOptimizer cannot honour the constraint {type(constraint).__name__} "
                    "with a cell filter, whose coordinates move with the cell: use FixAtoms "
                    "or FixSymmetry, or an ASE optimizer (BFGS) with the filter"
                )
            raise TypeError(
                f"BOOptimizer cannot honour the constraint {type(constraint).__name__}: it "
                "searches the model over linear subspaces of the Cartesian coordinates, "
                "which FixAtoms, FixCartesian, FixedPlane, FixedLine and FixSymmetry define; "
                "use one of these, or an ASE optimizer (BFGS) for bond, angle or "
                "internal-coordinate constraints"
            )


def held_forces(atoms):
    """What the constraints of ``atoms`` (a cell filter's: of its atoms) leave of fixed
    random forces, (n, 3): the same array where they hold the same coordinates."""
    inner = getattr(atoms, "atoms", atoms)
    forces = np.random.default_rng(0).normal(size=inner.positions.shape)  # (n, 3)
    for constraint in inner.constraints:
        constraint.adjust_forces(inner, forces)
    return forces


def check_constraints_unchanged(built, atoms, who):
    """Refuse to run where the constraints of ``atoms`` no longer hold what they held
    when the driver ``who`` was built (``built``: :func:`held_forces` then): its
    coordinates, model and checks were built on them."""
    if not np.allclose(held_forces(atoms), built, rtol=0.0, atol=1e-12):
        raise ValueError(
            f"the atoms' constraints changed since this {who} was built on them: build a "
            f"new {who} for the new constraints: given the same restart file, it takes "
            "the calls made where the new constraints reach them, else it refuses the file "
            "and another restart file name starts afresh"
        )


def check_finite(atoms, periodic):
    """Refuse a position that is NaN or inf, and such a cell where it counts (a cell
    filter, a periodic axis)."""
    bad = np.flatnonzero(~np.isfinite(atoms.positions).all(axis=1))
    if len(bad):
        raise ValueError(
            f"atom {bad[0]} has a position that is not a finite number "
            f"({atoms.positions[bad[0]].tolist()}): give every atom finite coordinates"
        )
    if periodic and not np.isfinite(np.array(atoms.cell)).all():
        raise ValueError(
            f"the cell holds a number that is not finite ({np.array(atoms.cell).tolist()}): "
            "give every lattice vector finite components"
        )


def check_cell(atoms, filtered):
    """Refuse a periodic cell of zero volume and atoms closer than ``CLOSEST_APPROACH``
    Å (across the boundary too)."""
    cell = np.array(atoms.cell)
    axes = np.ones(3, dtype=bool) if filtered else np.asarray(atoms.pbc, dtype=bool)
    lengths = np.linalg.norm(cell, axis=1)
    if (lengths[axes] < 1e-6).any() or np.linalg.matrix_rank(cell[axes], tol=1e-6) < axes.sum():
        raise ValueError(
            "the cell has zero volume along its periodic axes: give every periodic "
            "lattice vector a length (atoms.cell), or set atoms.pbc = False for a molecule"
        )
    check_closest_approach(atoms)


def check_closest_approach(atoms):
    """Refuse two atoms closer than ``CLOSEST_APPROACH`` Å, a molecule's or a periodic
    system's (across the boundary too): no calculator is asked about such a pair."""
    first, second, distances = neighbor_list("ijd", atoms, CLOSEST_APPROACH)
    if not len(distances):
        return
    closest = int(np.argmin(distances))
    pair = sorted((int(first[closest]), int(second[closest])))
    periodic = bool(np.any(atoms.pbc))
    raise ValueError(
        f"atoms {pair[0]} and {pair[1]} are {distances[closest]:.3f} Å apart"
        f"{' (across the periodic boundary?)' if periodic else ''}, closer than "
        f"{CLOSEST_APPROACH} Å: separate them{' or enlarge the cell' if periodic else ''}"
    )
