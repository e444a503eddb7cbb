"""The band as ASE's optimizer loop sees it under :class:`asebo.neb.BONEB`, evaluated
once per band, and the criteria its images converge to."""

import numpy as np
from ase.parallel import broadcast
from ase.utils.abc import Optimizable

from asebo.neb.band import evaluated_band, largest_forces, publish
from asebo.threads import with_optimizer_threads


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


class BandState:
    """The band evaluated at its images' positions and its convergence: a mixin of
    :class:`asebo.neb.BONEB` (``neb``, ``positions``, ``record``, ``comm``, ``fmax``,
    ``_values``, ``_state``)."""

    @with_optimizer_threads
    def band_state(self, every_rank=True):
        """The band at its images' positions, evaluated on the computed energies and
        forces where an image was computed at its place and the GP's elsewhere
        (:func:`asebo.neb.band.evaluated_band`), with ``computed`` (i,), which were, and
        ``values``, every image's energy (i,) and forces (i, n, 3); ``neb`` is given its
        values (:func:`asebo.neb.band.publish`). Once per band, record and ``climb``.

        Called by ``every_rank`` together (ASE's loop), rank 0's values are broadcast;
        else (rank 0 choosing the next image alone) they are its own."""
        positions = self.positions
        key = (positions.tobytes(), len(self.record.observations), self.neb.climb)
        cached = self._state is not None and self._state[0] == key
        if not cached or (every_rank and not self._state[2]):  # every rank broadcasts
            values = self._values(positions) if self.comm.rank == 0 else None
            if every_rank:
                values = broadcast(values, root=0, comm=self.comm)
            energies, forces, computed = values
            evaluated = evaluated_band(self.neb, positions, energies, forces)
            evaluated.computed, evaluated.values = computed, (energies, forces)
            self._state = (key, evaluated, every_rank)
        publish(self.neb, self._state[1])
        return self._state[1]

    def gradient_converged(self, gradient):
        """Whether every moving image was computed at its place and ASE's NEB forces on
        those energies and forces are below their criteria
        (:func:`asebo.neb.band_view.criteria`); no call."""
        state = self.band_state()
        below = largest_forces(state.band_forces) < criteria(self.neb, self.fmax)
        return bool(state.computed[1:-1].all() and below.all())
