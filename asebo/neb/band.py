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
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.mep import NEB
from scipy.spatial.transform import Rotation

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
