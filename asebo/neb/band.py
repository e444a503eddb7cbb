"""ASE's NEB forces on a band of given energies and forces, and a band on the model.

:func:`band_forces` evaluates ASE's own projection (:class:`ase.mep.NEB`: tangent,
springs, climbing image) on images whose energies and forces are given, so that the
forces of a band on the GP and on the computed values are ASE's to the last bit
(the images take :mod:`asebo.optimize.model_calculators`). The band on the model is an
:class:`OnceAtEachBand`, an NEB that evaluates each of its configurations once however
often an optimizer asks.
"""

import numpy as np
from ase.geometry import find_mic
from ase.mep import NEB

from asebo.optimize.model_calculators import ComputedValues, rigid_rotation


class OnceAtEachBand(NEB):
    """ASE's NEB, whose forces are evaluated once for each configuration of the band.

    ASE's optimizers ask for a band's forces three times at each step (the step, the log
    line, the convergence test), and each ask evaluates every image and tangent again.
    Here a repeated ask at the same positions returns the forces of the first, and
    leaves the NEB's state (energies, highest image) as that ask left it. Where the
    evaluation itself moves the images (``remove_rotation_and_translation``), nothing is
    kept.
    """

    _evaluated_at = _forces = None  # (i - 2) n x 3 positions, and their forces

    def get_forces(self):
        positions = self.get_positions()
        if self._evaluated_at is not None and np.array_equal(positions, self._evaluated_at):
            return self._forces.copy()
        forces = super().get_forces()
        self._evaluated_at = self._forces = None
        if np.array_equal(self.get_positions(), positions):
            self._evaluated_at, self._forces = positions, forces.copy()
        return forces


def like(neb, images, kind=NEB):
    """An NEB of ``images`` with the parameters of ``neb`` (spring constants, climbing
    image, method, removal of rotations and translations), of class ``kind``
    (:class:`ase.mep.NEB` or a subclass). No preconditioner: the methods that take one
    are refused (:data:`asebo.neb.checks.REFUSED_METHODS`)."""
    return kind(
        images,
        k=list(neb.k),
        climb=neb.climb,
        method=neb.method,
        remove_rotation_and_translation=neb.remove_rotation_and_translation,
        allow_shared_calculator=True,
    )


def band_copies(neb, positions):
    """Copies of the images of ``neb`` at ``positions`` (i, n, 3), without calculators."""
    copies = []
    for image, where in zip(neb.images, positions):
        copy = image.copy()  # constraints, cell and numbers kept
        copy.calc = None
        copy.positions = where
        copies.append(copy)
    return copies


def band_forces(neb, positions, energies, forces):
    """ASE's NEB forces of a band whose images have the given energies and forces.

    Parameters
    ----------
    neb : ase.mep.NEB
        Its parameters (:func:`like`) and images (atoms, constraints, cell).
    positions : array (i, n, 3)
        Every image, the endpoints included.
    energies : array (i,)
    forces : array (i, n, 3)
        Unconstrained forces; the images' constraints act on them as in ASE.

    Returns
    -------
    band : array (i - 2, n, 3)
        The NEB force of each moving image, the climbing image's included, in the frame
        of ``positions`` (where ASE turns the images onto their neighbours, the forces
        are turned back).
    climbing : int or None
        The climbing image among the moving ones (0-based), None without ``climb``.
    """
    evaluated = evaluated_band(neb, positions, energies, forces)
    return evaluated.band_forces, (evaluated.imax - 1) if neb.climb else None


def evaluated_band(neb, positions, energies, forces):
    """An NEB like ``neb`` at ``positions`` (i, n, 3) whose images have the given
    ``energies`` (i,) and unconstrained ``forces`` (i, n, 3), its forces evaluated: its
    ``energies``, ``real_forces``, ``imax``, ``emax`` and ``residuals`` ASE's, and
    ``band_forces`` (i - 2, n, 3) its NEB forces in the frame of ``positions``."""
    images = band_copies(neb, positions)
    for image, energy, force in zip(images, energies, forces):
        image.calc = ComputedValues(image, energy, force)
    band = like(neb, images)
    shape = (len(images) - 2, len(images[0]), 3)
    band.band_forces = band.get_forces().reshape(shape)
    band.energies = np.array(energies, dtype=float)  # (i,): aseneb leaves the ends unset
    for index, (where, image) in enumerate(zip(positions[1:-1], images[1:-1])):
        if not np.array_equal(where, image.positions):  # turned by ASE's NEB
            back = rigid_rotation(where, image.positions).inv()
            band.band_forces[index] = back.apply(band.band_forces[index])
            band.real_forces[index + 1] = back.apply(band.real_forces[index + 1])
    return band


def publish(neb, evaluated):
    """Give ``neb`` the energies, forces, highest image and residuals of ``evaluated``
    (:func:`evaluated_band`), as its own ``get_forces`` would: ``neb.iterimages()``
    (what ASE's trajectories and :class:`ase.mep.NEBTools` read), ``get_residual()`` and
    ``get_potential_energy()`` then answer without a call."""
    neb.energies = evaluated.energies.copy()
    neb.real_forces = evaluated.real_forces.copy()
    neb.imax, neb.emax = evaluated.imax, evaluated.emax
    neb.residuals = list(evaluated.residuals)


def largest_forces(band):
    """The largest atomic force of each image of ``band`` (i, n, 3): (i,)."""
    return np.sqrt((band**2).sum(axis=2)).max(axis=1)


def continuous_band(images):
    """Make a periodic band continuous in place: each atom of every image after the
    first moved by whole lattice vectors to its nearest image of the same atom in the
    image before (a band whose images were wrapped into the cell, read back from
    POSCAR files, say). The configurations and their energies are the same; the GP,
    whose periodic representation takes a wrap only beyond 0.75 of a lattice vector
    (:func:`asebo.model.springs.lattice_wrap`), then sees the band ASE's NEB springs and
    tangents see through the minimum image. A molecule's band is left as it is."""
    for before, image in zip(images, images[1:]):
        if not np.any(image.pbc):
            return
        offset = image.positions - before.positions  # (n, 3)
        nearest, _ = find_mic(offset, image.cell, image.pbc)
        if not np.allclose(nearest, offset, rtol=0.0, atol=1e-9):
            image.positions = before.positions + nearest
