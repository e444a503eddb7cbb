"""The band relaxed on the GP's surface, within a trust radius of what the GP knows.

The band is a copy of the NEB whose moving images take the GP's posterior mean
(:class:`asebo.optimize.model_calculators.ModelCalculator`) and whose endpoints keep their computed
energies and forces; ASE's optimizer moves it with ASE's NEB forces. As in the
GP-accelerated NEB of Koistinen et al. (J. Chem. Phys. 147, 152720 (2017)), each
image may stray only a trust radius from the configurations computed (or from where
the relaxation found it): the first step that takes one further is cut back to the
boundary (:func:`asebo.optimize.walk_trust.cut_back`) and the relaxation stops there, so
that the next call is made where the GP still knows the surface. Where the GP's prior
calculator fails (an xTB SCF that does not converge on a strained image), the model has
no value: the relaxation stops at the last band it had one for.
"""

import numpy as np
from ase.constraints import FixAtoms

from asebo.model.priors import PriorCalculationError
from asebo.neb.band import OnceAtEachBand, band_copies, largest_forces, like
from asebo.optimize.model_calculators import ComputedValues, ModelCalculator
from asebo.optimize.settings import WalkTrustSettings
from asebo.optimize.walk_trust import cut_back, distance_to


def model_band(neb, positions, models, computed, held):
    """An NEB like ``neb`` at ``positions`` (i, n, 3), each image on its GP in ``models``
    (:class:`asebo.neb.image_models.ImageModels`).

    ``computed`` gives the computed (energy, forces (n, 3)) of each image or None: the
    endpoints and the ``held`` images (a boolean mask (i,)) take theirs, and the held
    ones are held in place (``FixAtoms`` on every atom); the others take the GP's mean.
    """
    images = band_copies(neb, positions)
    last = len(images) - 1
    for index, image in enumerate(images):
        if index in (0, last) or held[index]:
            energy, forces = computed[index]
            image.calc = ComputedValues(image, energy, forces)
        else:
            image.calc = ModelCalculator(models.of(index))
        if held[index]:
            image.set_constraint(FixAtoms(indices=range(len(image))))
    return like(neb, images, kind=OnceAtEachBand)


def relax_on_model(
    band, known, trust_radius, fmax, steps, optimizer, held, bisections=WalkTrustSettings.bisections
):
    """Relax the model band ``band`` (:func:`model_band`) in place.

    Parameters
    ----------
    band : ase.mep.NEB
    known : array (k, n, 3)
        The configurations computed.
    trust_radius : float
        Å: no image goes further from ``known`` and from its own start.
    fmax : float
        eV/Å: the relaxation ends when the NEB forces of the images not held are below.
    steps : int
        Steps of ``optimizer`` at most.
    optimizer : ase.optimize.optimize.Optimizer class
    held : array (i,) of bool
        The images held in place, endpoints excluded.
    bisections : int
        Halvings of the step that crosses the trust radius
        (:func:`asebo.optimize.walk_trust.cut_back`).

    Returns
    -------
    reason : str
        Why the relaxation ended: ``'model fmax'``, ``'trust radius'``, ``'steps'``,
        or ``'prior failed'`` (the band is then the last one the model had forces for).
    """
    shape = (band.nimages - 2, band.natoms, 3)
    start = band.get_positions().reshape(shape)
    free = ~np.asarray(held[1:-1], dtype=bool)  # (i - 2,)
    last = start.copy()

    def beyond(moving):  # (i - 2, n, 3)
        return any(
            distance_to(np.concatenate([known, begin[None]]), image) > trust_radius
            for image, begin in zip(moving, start)
        )

    dynamics = optimizer(band, logfile=None)
    try:
        for _ in dynamics.irun(fmax=0.0, steps=steps):  # the test below ends it
            now = band.get_positions().reshape(shape)  # (i - 2, n, 3)
            if beyond(now):
                band.set_positions(cut_back(last, now - last, beyond, bisections).reshape(-1, 3))
                band.get_forces()  # the model has a value there
                return "trust radius"
            forces = band.get_forces().reshape(shape)
            last = now
            if largest_forces(forces[free]).max() < fmax:
                return "model fmax"
    except PriorCalculationError:
        band.set_positions(last.reshape(-1, 3))
        return "prior failed"
    return "steps"
