"""The GP's posterior mean and an image's computed values as ASE calculators.

:class:`ModelCalculator` is the GP's posterior mean as an ASE calculator (what a band
relaxes on, what a saddle search walks on) and :class:`ComputedValues` a configuration's
computed energy and forces; both compare a configuration with the one they hold by its
positions, numbers, cell and periodicity alone (:class:`ExactConfigurationCheck`),
where ASE's calculators compare every array of the atoms with a tolerance, at each of
the many asks of ASE's NEB and of Sella.
"""

import numpy as np
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from scipy.spatial.transform import Rotation

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


class ComputedValues(ExactConfigurationCheck, Calculator):
    """An image's computed energy and forces, as an ASE calculator that never calls one.

    At the configuration computed it returns the values computed; at that configuration
    moved as a whole (ASE's NEB turns and shifts its images onto their neighbours where
    ``remove_rotation_and_translation`` is set) the same energy and the forces turned
    with it; elsewhere it raises ``PropertyNotImplementedError``, as ASE's
    ``SinglePointCalculator`` does.

    Parameters
    ----------
    atoms : ase.Atoms
        The image, at the configuration computed.
    energy : float
        eV.
    forces : array (n, 3)
        eV/Å.
    """

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, atoms, energy, forces):
        super().__init__()
        self.atoms = atoms.copy()
        self.computed_at = atoms.positions.copy()  # (n, 3)
        self.computed = float(energy), np.array(forces, dtype=float)  # (), (n, 3)
        self.results = _values(*self.computed)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        if set(system_changes) - {"positions"}:
            raise PropertyNotImplementedError("the image's computed values are of other atoms")
        rotation = rigid_rotation(self.computed_at, atoms.positions)
        if rotation is None:
            raise PropertyNotImplementedError(
                "the image has moved from its computed configuration: no values there"
            )
        super().calculate(atoms, properties, system_changes)
        energy, forces = self.computed
        self.results = _values(energy, rotation.apply(forces))


def _values(energy, forces):
    """ASE's results of an energy and its forces (n, 3)."""
    return {"energy": energy, "free_energy": energy, "forces": np.array(forces)}


def rigid_rotation(reference, moved, tolerance=1e-11):
    """The rotation (scipy ``Rotation``) that, with a translation, takes ``reference``
    (n, 3) onto ``moved`` (n, 3) within ``tolerance`` Å on every atom; None where no
    rigid motion does."""
    reference_centred = reference - reference.mean(axis=0)
    moved_centred = moved - moved.mean(axis=0)
    if len(reference) == 1:
        return Rotation.identity()
    rotation, _ = Rotation.align_vectors(moved_centred, reference_centred)
    misfit = np.abs(rotation.apply(reference_centred) - moved_centred).max()
    return rotation if misfit <= tolerance else None
