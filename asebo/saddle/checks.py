"""The checks of what :class:`asebo.saddle.BOSaddle` is given, each a one-line error that
says what to do, raised before any calculator call."""

import numpy as np
from ase import Atoms
from ase.constraints import FixAtoms

from asebo.optimize.observations import held_elsewhere
from asebo.optimize.resolve import positive_number
from asebo.optimize.subspace import free_atoms
from asebo.optimize.system_checks import (
    check_cell,
    check_closest_approach,
    check_computes,
    check_constraints_unchanged,
    check_distinct_files,
    check_finite,
    held_forces,
)


def check_saddle_system(atoms, order=1, **files):
    """Raise ValueError for what the saddle search cannot take, before any call: an
    ``order`` but 1 (:func:`check_order`), not an ``ase.Atoms``, one atom, no
    calculator, a constraint but ``FixAtoms``, every atom held, a position that is not
    finite, two atoms closer than :data:`asebo.model.springs.CLOSEST_APPROACH` Å (across
    the cell's faces where it is periodic), two of its ``files`` (``restart``,
    ``logfile``, ``trajectory``) that are one file; ImportError without Sella. Return
    what the constraints hold (:func:`asebo.optimize.system_checks.held_forces`), for
    :func:`run_fmax`."""
    check_order(order)
    check_distinct_files(**files)
    if not isinstance(atoms, Atoms):
        raise ValueError(
            f"BOSaddle searches a saddle point of an ase.Atoms, got {type(atoms).__name__}: "
            "pass the atoms themselves (a cell filter's saddle is not supported)"
        )
    if len(atoms) < 2:
        raise ValueError("BOSaddle needs two atoms or more: one atom has no saddle point")
    if atoms.calc is None:
        raise ValueError("BOSaddle needs a calculator: attach one (atoms.calc = ...)")
    check_computes(atoms.calc, "BOSaddle")
    other = [type(c).__name__ for c in atoms.constraints if not isinstance(c, FixAtoms)]
    if other:
        raise ValueError(
            f"BOSaddle honours FixAtoms only, not {', '.join(other)}: remove those constraints"
        )
    if not free_atoms(atoms).any():
        raise ValueError("BOSaddle needs an atom that moves: FixAtoms holds every atom")
    periodic = bool(atoms.pbc.any())
    check_finite(atoms, periodic)
    if periodic:
        check_cell(atoms, False)
    else:
        check_closest_approach(atoms)
    try:
        import sella  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "BOSaddle walks on its model with Sella: pip install 'asebo[sella]'"
        ) from error
    return held_forces(atoms)


def run_fmax(search, fmax):
    """The ``fmax`` of a run of ``search`` (a BOSaddle), refused in one line unless a
    number > 0, or where the atoms' constraints changed since the search was built."""
    check_constraints_unchanged(search._held, search.atoms, type(search).__name__)
    return positive_number("fmax", fmax, None)


def check_order(order):
    """Refuse a saddle point's ``order`` (Sella's keyword) other than 1 in one line."""
    whole = isinstance(order, (int, np.integer)) and not isinstance(order, bool)
    if not whole or order != 1:
        raise ValueError(
            f"BOSaddle searches first-order saddle points only (order=1), got order={order!r}: "
            "leave order out, or use Sella for another order"
        )


def checked_observations(observations, atoms):
    """``observations`` as arrays (positions (m, n, 3), energies (m,), forces (m, n, 3)),
    none for None; a one-line ValueError for other shapes, values not finite, or
    configurations computed without the constraints of ``atoms`` (held atoms elsewhere:
    :func:`asebo.optimize.observations.held_elsewhere`)."""
    n = len(atoms)
    if observations is None:
        return np.zeros((0, n, 3)), np.zeros(0), np.zeros((0, n, 3))
    positions, energies, forces = (np.asarray(a, dtype=float) for a in observations)
    m = len(energies)
    if positions.shape != (m, n, 3) or forces.shape != (m, n, 3) or energies.shape != (m,):
        raise ValueError(
            f"observations must be positions (m, {n}, 3), energies (m,) and forces "
            f"(m, {n}, 3) of these atoms, got {positions.shape}, {energies.shape}, "
            f"{forces.shape}"
        )
    if not all(np.isfinite(a).all() for a in (positions, energies, forces)):
        raise ValueError("observations hold values that are not finite: leave those out")
    found = held_elsewhere(positions, atoms.positions, free_atoms(atoms), atoms.cell, atoms.pbc)
    if found is not None:
        index, where, distance = found
        raise ValueError(
            f"observations: configuration {index} has {where} {distance:.3g} Å from where "
            "the constraints hold it: computed without them, it cannot be reached; leave it out"
        )
    return positions, energies, forces
