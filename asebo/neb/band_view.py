"""The band as ASE's optimizer loop sees it under :class:`asebo.neb.BONEB`, and the
criteria its images converge to."""

import numpy as np
from ase.utils.abc import Optimizable


class RecordedBand(Optimizable):
    """ASE's view of a band whose forces are never computed by asking every image:
    the NEB forces on the computed energies and forces where an image was computed at
    its place, on the GP's elsewhere (:meth:`asebo.neb.BONEB.band_state`).

    Parameters
    ----------
    driver : asebo.neb.BONEB
    """

    def __init__(self, driver):
        self.driver = driver

    def ndofs(self):
        return 3 * len(self.driver.neb)

    def get_x(self):
        return self.driver.positions[1:-1].ravel()

    def set_x(self, x):
        moving = np.reshape(x, (len(self.driver.images) - 2, -1, 3))
        for image, positions in zip(self.driver.images[1:-1], moving):
            image.set_positions(positions)

    def get_gradient(self):
        return -self.driver.band_state().band_forces.ravel()

    def get_value(self):
        return float(self.driver.band_state().emax)

    def iterimages(self):
        self.driver.band_state()  # the band's values given to the NEB
        return self.driver.neb.iterimages()


def criteria(neb, fmax):
    """The largest NEB force (eV/Å) each moving image of ``neb`` (i - 2,) converges to:
    ``fmax``; with :class:`ase.mep.DyNEB`'s dynamic relaxation, ``fmax`` times
    ``1 + scale_fmax d`` for the images other than the highest, ``d`` (Å) the norm of
    an image's displacement from the highest (P. Lindgren, G. Kastlunger and
    A. A. Peterson, J. Chem. Theory Comput. 15, 5787 (2019)), as ASE's ``DyNEB``
    scales them. Needs the band's highest image (``neb.imax``, from its forces)."""
    moving = np.array([image.positions for image in neb.images[1:-1]])  # (i - 2, n, 3)
    if not getattr(neb, "dynamic_relaxation", False):
        return np.full(len(moving), float(fmax))
    highest = neb.imax - 1
    distances = np.sqrt(((moving - moving[highest]) ** 2).sum(axis=(1, 2)))
    scaled = fmax * (1 + distances * neb.scale_fmax)
    scaled[highest] = fmax
    return scaled
