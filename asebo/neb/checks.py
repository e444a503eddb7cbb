"""What :class:`asebo.neb.BONEB` refuses, with a one-line error before any call."""

import numpy as np
from ase.constraints import FixAtoms
from ase.mep.neb import BaseNEB

from asebo.optimize.subspace import free_atoms
from asebo.optimize.system_checks import (
    check_closest_approach,
    check_computes,
    check_finite,
    held_forces,
)

METHODS = ("aseneb", "eb", "improvedtangent", "spline", "string")
"""The NEB methods ASE knows (:class:`ase.mep.NEB`)."""
REFUSED_METHODS = ("spline", "string")
"""The methods BONEB refuses: on ASE's Cu vacancy hop (Morse) a band of ``spline``
converged 68 meV below the saddle, and ``string`` collapsed onto its ends
(docs/notes/one-engine.md)."""


def check_band(neb):
    """Raise TypeError or ValueError where BONEB cannot optimize ``neb``.

    Refused: what is no :class:`ase.mep.NEB`; fewer than three images (one moving);
    images of other atoms, boundary conditions or cells; an image without a
    calculator; a method ASE does not know, or one of :data:`REFUSED_METHODS` (the
    methods that take a preconditioner); constraints other than
    ``FixAtoms``, or ``FixAtoms`` that differ between images; the rigid alignment of
    images (``remove_rotation_and_translation``) with held atoms or a periodic cell;
    positions that are not finite, or atoms closer than
    :data:`asebo.optimize.system_checks.CLOSEST_APPROACH` Å.

    Returns
    -------
    list of array (n, 3)
        What each image's constraints hold
        (:func:`asebo.optimize.system_checks.held_forces`), checked at each run.
    """
    if not isinstance(neb, BaseNEB):
        raise TypeError(
            f"BONEB optimizes an ase.mep.NEB band, got {type(neb).__name__}: build one with "
            "NEB(images, climb=True), or use BOOptimizer for a single configuration"
        )
    images = neb.images
    if len(images) < 3:
        raise ValueError(
            f"the band has {len(images)} images, no moving one: give the two endpoints and "
            "at least one image between them"
        )
    if neb.method not in METHODS:
        raise ValueError(f"NEB method {neb.method!r} is not one of ASE's: {', '.join(METHODS)}")
    if neb.method in REFUSED_METHODS:
        raise ValueError(
            f"BONEB does not take NEB method {neb.method!r}: its band on the model does not "
            "converge to ASE's barrier with it; use method='improvedtangent' (or 'aseneb', "
            "'eb')"
        )
    first = images[0]
    for index, image in enumerate(images):
        _check_same_system(first, image, index)
        _check_calculator(image, index, len(images))
        _check_constraints(first, image, index)
        _check_positions(image, index)
    if getattr(neb, "remove_rotation_and_translation", False) and (
        first.constraints or np.any(first.pbc)
    ):
        raise ValueError(
            "remove_rotation_and_translation aligns every atom of the images rigidly, "
            "which held atoms or a periodic cell do not allow: pass "
            "remove_rotation_and_translation=False"
        )
    return [held_forces(image) for image in images]


def _check_positions(image, index):
    """Refuse positions that are not finite and atoms on top of one another, naming the
    image."""
    try:
        check_finite(image, bool(np.any(image.pbc)))
        check_closest_approach(image)
    except ValueError as error:
        raise ValueError(f"image {index}: {error}") from None


def _check_same_system(first, image, index):
    """Refuse an image of other atoms, boundary conditions or cell than the first."""
    same = (
        len(image) == len(first)
        and (image.numbers == first.numbers).all()
        and (image.pbc == first.pbc).all()
        and np.allclose(image.cell, first.cell, atol=1e-8)
    )
    if not same:
        raise ValueError(
            f"image {index} holds other atoms, boundary conditions or cell than image 0: "
            "every image of a band is the same atoms in the same cell"
        )


def _check_calculator(image, index, count):
    """Refuse an image without a calculator, and a moving image's that computes nothing
    (an endpoint's results read from a file are its energy and forces)."""
    if image.calc is None:
        what = "an endpoint" if index in (0, count - 1) else "a moving image"
        raise ValueError(
            f"image {index}, {what}, has no calculator: attach one to every image "
            "(the endpoints' energies are computed once; BONEB calls the moving images')"
        )
    if index not in (0, count - 1):
        check_computes(image.calc, f"BONEB's moving image {index}")


def _check_constraints(first, image, index):
    """Refuse constraints other than FixAtoms, and FixAtoms that differ from the first."""
    for constraint in image.constraints:
        if not isinstance(constraint, FixAtoms):
            raise ValueError(
                f"BONEB cannot honour the constraint {type(constraint).__name__} of image "
                f"{index}: only FixAtoms; use ASE's NEB with an ASE optimizer for others"
            )
    if not (free_atoms(image) == free_atoms(first)).all():
        raise ValueError(
            f"image {index} fixes other atoms than image 0: give every image the same FixAtoms"
        )
