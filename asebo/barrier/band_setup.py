"""The band between two minima that :func:`asebo.barrier.transition_state` relaxes, and
the checks of what it is given, each a one-line error before any call."""

import numbers

import numpy as np
from ase import Atoms
from ase.calculators.calculator import BaseCalculator
from ase.mep import NEB

from asebo.barrier.connection import held_atoms, rmsd

SAME_MINIMUM = 0.05
"""Å: two minima this close (RMSD) are one, and no reaction joins them."""


def same_system(initial, final):
    """Whether two endpoints hold the same atoms in the same order, boundary conditions
    and cell (1e-8 Å): what a band between them needs."""
    return (
        len(initial) == len(final)
        and np.array_equal(initial.numbers, final.numbers)
        and np.array_equal(initial.pbc, final.pbc)
        and np.allclose(initial.cell, final.cell, atol=1e-8)
    )


def system_difference(initial, final):
    """What differs between two endpoints that are not :func:`same_system`, in words."""
    if len(initial) != len(final) or not np.array_equal(initial.numbers, final.numbers):
        return f"atoms {final.get_chemical_formula()} against {initial.get_chemical_formula()}"
    if not np.array_equal(initial.pbc, final.pbc):
        return f"pbc {final.pbc.tolist()} against {initial.pbc.tolist()}"
    apart = np.abs(np.asarray(final.cell) - np.asarray(initial.cell)).max()
    return f"a cell vector component {apart:.3g} Å apart"


def check_endpoints(initial, final, calculator, n_images):
    """Raise ValueError (TypeError for what is not an ``ase.Atoms`` or a calculator)
    where no band can join ``initial`` and ``final``: other atoms, cells or boundary
    conditions, one configuration twice, fewer than one moving image."""
    for name, atoms in (("initial", initial), ("final", final)):
        if not isinstance(atoms, Atoms):
            raise TypeError(f"{name} must be an ase.Atoms, got {type(atoms).__name__}")
    if not isinstance(calculator, BaseCalculator):
        raise TypeError(
            f"calculator must be an ASE calculator (EMT(), TBLite(...)), got "
            f"{type(calculator).__name__}"
        )
    whole = isinstance(n_images, numbers.Integral) and not isinstance(n_images, bool)
    if not whole or n_images < 1:
        raise ValueError(
            f"n_images must be a whole number of moving images, 1 or more, got {n_images!r}"
        )
    if not same_system(initial, final):
        raise ValueError(
            "initial and final hold other atoms (numbers, order), cells or boundary "
            "conditions: give the same atoms in the same order and cell"
        )
    held = [np.unique(held_atoms(atoms)).tolist() for atoms in (initial, final)]
    if held[0] != held[1]:
        raise ValueError(
            f"initial and final hold other atoms fixed (FixAtoms: {len(held[0])} and "
            f"{len(held[1])} atoms): give both the same FixAtoms"
        )
    apart = rmsd(initial, final)
    if apart < SAME_MINIMUM:
        raise ValueError(
            f"initial and final are one configuration (RMSD {apart:.3f} Å): give the two "
            "minima the transition state joins"
        )


def interpolated_band(initial, final, calculator, n_images, climb):
    """The band of ``n_images`` moving images between ``initial`` and ``final`` (their
    constraints kept) by ASE's image-dependent pair potential (IDPP: S. Smidstrup, A.
    Pedersen, K. Stokbro and H. Jónsson, J. Chem. Phys. 140, 214106 (2014)), every
    image computed by the one ``calculator`` (one image at a time), ASE's
    ``improvedtangent`` method, the climbing image where ``climb``."""
    images = [initial.copy() for _ in range(n_images + 1)] + [final.copy()]
    for image in images:
        image.calc = calculator
    neb = NEB(images, climb=climb, method="improvedtangent", allow_shared_calculator=True)
    interpolate(neb, "idpp")
    return neb


def interpolate(neb, method):
    """ASE's ``neb.interpolate(method)`` (``'idpp'`` or ``'linear'``), constraints not
    applied; ValueError where an image is left with positions that are not finite: two
    atoms meet on the straight path between the endpoints (IDPP divides by their
    distance), as where two like atoms are exchanged between them."""
    neb.interpolate(method=method, apply_constraint=False)
    images = neb.images
    if all(np.isfinite(image.positions).all() for image in images):
        return
    start, end = images[0].positions, images[-1].positions  # (n, 3)
    closest = (np.inf, 0, 0, 0.0)
    for t in np.linspace(0.0, 1.0, 101)[1:-1]:
        path = (1 - t) * start + t * end  # (n, 3)
        distances = np.linalg.norm(path[:, None] - path[None], axis=2) + np.diag(
            np.full(len(path), np.inf)
        )
        i, j = np.unravel_index(np.argmin(distances), distances.shape)
        closest = min(closest, (float(distances[i, j]), int(i), int(j), float(t)))
    _, i, j, t = closest
    raise ValueError(
        f"the {method} interpolation of the band fails: atoms {i} and {j} meet on the "
        f"straight path between the endpoints ({t:.2f} of the way), as where two like "
        "atoms are exchanged between them; give the endpoints with their atoms in one "
        "order, or images of your own"
    )
