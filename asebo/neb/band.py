"""ASE's NEB forces on a band of given energies and forces, and a band on the model.

:func:`band_forces` evaluates ASE's own projection (:class:`ase.mep.NEB`: tangent,
springs, climbing image) on images whose energies and forces are given, so that the
forces of a band on the GP and on the computed values are ASE's to the last bit.
:class:`ModelCalculator` is the GP's posterior mean as an ASE calculator and
:class:`ComputedValues` an image's computed energy and forces; both compare a
configuration with the one they hold by its positions, numbers, cell and periodicity
alone (:class:`ExactConfigurationCheck`), where ASE's calculators compare every array of
the atoms with a tolerance, at each of the many asks of ASE's NEB (every image's energy
and forces at each of its force evaluations). The band on the model is an
:class:`OnceAtEachBand`, an NEB that evaluates each of its configurations once however
often an optimizer asks.
"""

import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.singlepoint import SinglePointCalculator
from ase.mep import NEB

PRECONDITIONED = ("spline", "string")
"""The NEB methods that take a preconditioner (ASE sets one for the others itself)."""

CONFIGURATION = ("positions", "numbers", "cell", "pbc")


class ExactConfigurationCheck:
    """A calculator mixin whose ``check_state`` compares ``CONFIGURATION`` exactly: the
    values a model of the energy or an image's computed values depend on, bit for bit
    (ASE's NEB asks each moving image three times per force evaluation of the band)."""

    def check_state(self, atoms, tol=1e-15):
        if self.atoms is None:
            return list(all_changes)
        return [name for name in CONFIGURATION if _bits(self.atoms, name) != _bits(atoms, name)]


def _bits(atoms, name):
    """The bytes of the array ``name`` of ``CONFIGURATION`` of ``atoms``."""
    values = atoms.cell.array if name == "cell" else getattr(atoms, name)
    return values.tobytes()  # C order, whatever the array's layout


class ModelCalculator(ExactConfigurationCheck, Calculator):
    """The posterior mean energy and forces of a fitted GP, as an ASE calculator.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to the configurations computed.
    """

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, gp, **kwargs):
        super().__init__(**kwargs)
        self.gp = gp

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        energy, gradient = self.gp.predict(self.atoms.positions, return_gradient=True)
        self.results = {
            "energy": float(energy),
            "free_energy": float(energy),
            "forces": -np.asarray(gradient),  # (n, 3)
        }


class ComputedValues(ExactConfigurationCheck, SinglePointCalculator):
    """An image's computed energy and forces, as ASE's ``SinglePointCalculator``.

    Parameters
    ----------
    atoms : ase.Atoms
        The image, at the configuration computed.
    energy : float
        eV.
    forces : array (n, 3)
        eV/Å.
    """

    def __init__(self, atoms, energy, forces):
        energy = float(energy)
        super().__init__(atoms, energy=energy, free_energy=energy, forces=np.array(forces))


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
    image, method, preconditioner, removal of rotations and translations), of class
    ``kind`` (:class:`ase.mep.NEB` or a subclass)."""
    return kind(
        images,
        k=list(neb.k),
        climb=neb.climb,
        method=neb.method,
        remove_rotation_and_translation=neb.remove_rotation_and_translation,
        allow_shared_calculator=True,
        precon=neb.precon if neb.method in PRECONDITIONED else None,
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
        The NEB force of each moving image, the climbing image's included.
    climbing : int or None
        The climbing image among the moving ones (0-based), None without ``climb``.
    """
    images = band_copies(neb, positions)
    for image, energy, force in zip(images, energies, forces):
        image.calc = ComputedValues(image, energy, force)
    band = like(neb, images)
    result = band.get_forces().reshape(len(images) - 2, len(images[0]), 3)
    return result, (band.imax - 1) if neb.climb else None


def largest_forces(band):
    """The largest atomic force of each image of ``band`` (i, n, 3): (i,)."""
    return np.sqrt((band**2).sum(axis=2)).max(axis=1)
