"""How the GP sees a configuration: one object per choice of the optimizer's ``kernel``.

A representation carries what follows from that choice, decided once when the
optimizer is built (as Sella's ``initialize_pes`` decides its coordinates):

- :meth:`Representation.check`: whether it can describe the atoms (a ValueError that
  says what to use instead);
- :meth:`Representation.gp_kernel`: the GP's configuration kernel
  (:mod:`asebo.kernels.configuration`);
- :meth:`Representation.metric`: the features the kernel sees, rebuilt with the Lindh
  model the prior recentres, and its own validity check on the observations (the
  internal coordinates give way to aligned positions where they fold);
- :meth:`Representation.invariant`: whether the model is blind to rigid motions;
- ``default_trend``, ``default_recentre`` and ``prior_by_forces``: the GP's linear
  trend and the Lindh prior's recentring that suit it.

The six: :class:`InternalCoordinates` (``'internal'``), :class:`AlignedPositions`
(``'anisotropic'``), :class:`SVDRepresentation` (``'svd'``),
:class:`CartesianPositions` (``'cartesian'``), :class:`InverseDistancePositions`
(``'inverse'``, the default of a molecule's band in :class:`asebo.neb.BONEB`) and, for
periodic cells and cell filters, :class:`PeriodicPositions` (``'periodic'``);
:func:`make_representation` turns a name into one.

A new representation subclasses
:class:`Representation`: it names its configuration kernel, refuses the atoms it
cannot describe in :meth:`~Representation.check`, and returns from
:meth:`~Representation.metric` an object with the interface of
:class:`asebo.model.metric.HessianMetric` (``features``, ``feature_gradients``,
``features_and_pullback``, ``invariant``; :mod:`asebo.model.metric`), which the GP
maps energies and forces through.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from ase.constraints import FixCartesian, FixedLine, FixedPlane

from asebo.kernels.configuration import configuration_kernel
from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.inverse_distances import InverseDistanceMetric
from asebo.model.lindh import LindhModel
from asebo.model.metric import HessianMetric, InternalMetric
from asebo.model.periodic import PeriodicMetric
from asebo.model.springs import ExpSprings
from asebo.model.straightness import is_near_linear


def _fixed_axes(atoms):
    """Whether a constraint holds coordinates along fixed directions in space
    (FixCartesian, FixedPlane, FixedLine)."""
    return any(isinstance(c, (FixCartesian, FixedPlane, FixedLine)) for c in atoms.constraints)


def describes(atoms):
    """Whether the internal coordinates of the Lindh model describe every vibration of
    ``atoms`` (:class:`asebo.model.metric.InternalMetric`) and the molecule is not
    near-linear (:func:`asebo.model.straightness.is_near_linear`)."""
    positions = atoms.get_positions()
    if is_near_linear(positions):
        return False
    try:
        InternalMetric.from_model(LindhModel(positions, atoms.numbers), positions)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Representation:
    """The base of the representations (module docstring): Cartesian positions, no metric.

    Attributes
    ----------
    name : str
        The optimizer's ``kernel`` name.
    configuration_kernel : str
        The GP's configuration kernel (:data:`asebo.kernels.configuration.KERNELS`).
    default_trend : float
        Slope variance of the GP's linear trend over a gradient's variance.
    default_recentre : float
        eV: the Lindh prior's recentring.
    prior_by_forces : bool
        Whether the Lindh prior takes its recentred model only where that fits the
        observed forces better, while the metric follows the model each time
        (:class:`asebo.model.priors.RecentredLindh`); else it always does.
    """

    name: ClassVar[str] = "cartesian"
    configuration_kernel: ClassVar[str] = "cartesian"
    default_trend: ClassVar[float] = 0.0
    default_recentre: ClassVar[float] = 0.3
    prior_by_forces: ClassVar[bool] = False

    def check(self, atoms):
        """Raise ValueError where this representation cannot describe ``atoms``."""

    def gp_kernel(self, **options):
        """The GP's configuration kernel, with ``proper`` and ``radial`` of ``options``."""
        return configuration_kernel(self.configuration_kernel, **options)

    def metric(self, positions, numbers, centre, model, current):
        """The metric for the observations ``positions`` (m, n, 3), and notes for the log.

        Parameters
        ----------
        positions : array (m, n, 3)
        numbers : array (n,)
        centre : int
            The observation the metric is built around.
        model : asebo.model.lindh.LindhModel or None
            The Lindh model it is built from; None: one of ``positions[centre]``.
        current : (int, metric) or None
            The metric of the last fit and its centre, kept while still valid.

        Returns
        -------
        (int, metric) or None
            The metric and its centre (None: the kernel sees the positions).
        notes : tuple of str
        """
        return None, ()

    def invariant(self, metric):
        """Whether the model with ``metric`` is blind to rotations and translations."""
        return False


@dataclass(frozen=True)
class CartesianPositions(Representation):
    """The Gaussian kernel on Cartesian positions: periodic cells, FixCartesian."""


@dataclass(frozen=True)
class SVDRepresentation(Representation):
    """The rotation-invariant SVD kernel with one length scale (Wong and Kolter)."""

    name: ClassVar[str] = "svd"
    configuration_kernel: ClassVar[str] = "svd"

    def check(self, atoms):
        if np.any(atoms.pbc):
            raise ValueError(
                "the SVD kernel is invariant to rotations, which a periodic cell is "
                "not: use kernel='cartesian' (the default for periodic atoms) or "
                "set atoms.pbc = False for a molecule"
            )
        if _fixed_axes(atoms):
            raise ValueError(
                "FixCartesian (or FixedPlane, FixedLine) holds coordinates along fixed "
                "axes, which the rotation-invariant SVD kernel cannot tell apart: use "
                "kernel='cartesian' (the default with FixCartesian)"
            )

    def invariant(self, metric):
        return True


@dataclass(frozen=True)
class AlignedPositions(Representation):
    """The Gaussian kernel on positions aligned onto the reference and scaled along the
    eigenvectors of the Lindh Hessian there (:class:`asebo.model.metric.HessianMetric`);
    not aligned for a near-linear molecule, whose rotation about its axis hangs on
    small displacements across it."""

    name: ClassVar[str] = "anisotropic"

    def check(self, atoms):
        if np.any(atoms.pbc) or _fixed_axes(atoms):
            raise ValueError(
                f"the {self.name} kernel describes the molecule by the Lindh model of its "
                "bonds, invariant to rotations, which a periodic cell or coordinates fixed "
                "along axes do not allow: use kernel='cartesian' (the default there)"
            )

    def metric(self, positions, numbers, centre, model, current):
        if current is not None and current[0] == centre:
            return current, ()
        return (centre, _aligned_metric(positions[centre], numbers, model)), ()

    def invariant(self, metric):
        return metric is not None and metric.invariant


@dataclass(frozen=True)
class InternalCoordinates(AlignedPositions):
    """The Gaussian kernel on the delocalized internal coordinates of the Lindh model,
    scaled by its Hessian (:class:`asebo.model.metric.InternalMetric`), with a linear
    trend in them.

    Where the internal coordinates do not describe every vibration at the metric's
    centre, or fold at a configuration computed (the smallest singular value of their
    Jacobian below ``folded`` times that at the centre: a planar centre relaxed from a
    pyramidal start), the kernel takes :class:`AlignedPositions`' metric instead.

    Parameters
    ----------
    folded : float
        :meth:`asebo.model.metric.InternalMetric.conditioning` below which the
        coordinates count as folded.
    """

    name: ClassVar[str] = "internal"
    default_trend: ClassVar[float] = 30.0
    # a model rebuilt under the trend changes the features too, so it is rebuilt only
    # where the start's model fails, 2 eV above its minimum (a centre drawn flat, say;
    # each value's calls in docs/notes/recentring.md)
    default_recentre: ClassVar[float] = 2.0
    # the trend takes up the slope of the old model's well: on a long way down the soft
    # torsions the old model fits the forces better (docs/notes/large-molecules.md)
    prior_by_forces: ClassVar[bool] = True
    folded: float = 0.2

    def check(self, atoms):
        super().check(atoms)
        if not describes(atoms):
            raise ValueError(
                "the internal coordinates of this molecule do not describe all its "
                "vibrations (a near-linear molecule?): use kernel='anisotropic' (the "
                "default here)"
            )

    def metric(self, positions, numbers, centre, model, current):
        notes = ()
        if current is None or current[0] != centre:
            metric, notes = self._new_metric(positions[centre], numbers, model)
            current = (centre, metric)
        if isinstance(current[1], InternalMetric):
            worst = min(current[1].conditioning(x) for x in positions)
            if worst < self.folded:
                notes = (
                    *notes,
                    "the internal coordinates fold at a configuration computed (their "
                    f"Jacobian keeps {worst:.2g} of its smallest singular value): the "
                    "kernel takes aligned positions instead",
                )
                current = (centre, _aligned_metric(positions[centre], numbers, model))
        return current, notes

    @staticmethod
    def _new_metric(reference, numbers, model):
        """The internal-coordinate metric at ``reference`` (n, 3), or the aligned one where
        the molecule is near-linear or the coordinates miss a vibration; and notes."""
        model = _model(model, reference, numbers)
        if is_near_linear(reference):
            return _aligned_metric(reference, numbers, model), ()
        try:
            return InternalMetric.from_model(model, reference), ()
        except ValueError as error:
            note = f"{error}: the kernel takes aligned positions instead"
            return _aligned_metric(reference, numbers, model), (note,)


@dataclass(frozen=True)
class InverseDistancePositions(Representation):
    """The Gaussian kernel on the scaled inverse distances of every pair of atoms
    (:class:`asebo.model.inverse_distances.InverseDistanceMetric`; Koistinen, Ásgeirsson,
    Vehtari and Jónsson, J. Chem. Theory Comput. 15, 6738 (2019)): invariant to rigid
    motions and built on no reference configuration or model Hessian, so as good far
    from any one configuration as near it (the images of a band across a reaction).
    The GP sees ``n (n - 1) / 2`` features where the other representations give it
    ``3n``: its covariance grows as ``n^2`` per observation.
    """

    name: ClassVar[str] = "inverse"

    def check(self, atoms):
        if np.any(atoms.pbc) or _fixed_axes(atoms):
            raise ValueError(
                "the inverse distances describe a molecule, invariant to rotations, which "
                "a periodic cell or coordinates fixed along axes do not allow: use "
                "kernel='cartesian' (the default there)"
            )
        if len(atoms) < 3:
            raise ValueError(
                f"{len(atoms)} atoms: the inverse distances describe three atoms or more; "
                "use kernel='svd'"
            )

    def metric(self, positions, numbers, centre, model, current):
        if current is not None:
            return current, ()
        return (centre, InverseDistanceMetric(numbers)), ()

    def invariant(self, metric):
        return metric is not None


@dataclass(frozen=True)
class PeriodicPositions(Representation):
    """The Gaussian kernel on the features of :class:`asebo.model.periodic.PeriodicMetric`:
    each atom's displacement to the nearest lattice image (and a cell filter's
    deformation), scaled along the eigenvectors of the pair springs' Hessian
    (:class:`asebo.model.springs.ExpSprings`, Packwood et al., J. Chem. Phys. 144,
    164109 (2016)) at the springs' centre, with a linear trend in them. Only the free
    coordinates enter: atoms held by ``FixAtoms`` are left out, and so are the rigid
    translations when no atom is held.

    The springs are the prior's (:class:`asebo.model.periodic.RecentredSprings`), and the
    metric is rebuilt when the prior recentres; under another prior, springs of the
    first configuration.

    Parameters
    ----------
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates
        The map of the optimizer's positions (atoms, or a cell filter's generalized
        positions) to atoms and cell.
    power : float
        The metric is the springs' Hessian to this power: 0.75, stiffer than the
        molecules' 0.5 (:data:`asebo.model.metric.POWER`), chosen side by side with 0.5
        and 0.25 on ``asebo bench surfaces``, ``bulk`` and ``cells`` (the calls in
        docs/notes/periodic-tuning.md).
    """

    name: ClassVar[str] = "periodic"
    # chosen on the EMT surfaces, bulk and cell sets (docs/notes/periodic-tuning.md)
    default_trend: ClassVar[float] = 30.0
    default_recentre: ClassVar[float] = 0.3
    coordinates: GeneralizedCoordinates = None
    power: float = 0.75

    def check(self, atoms):
        if self.coordinates is None:
            raise ValueError(
                "PeriodicPositions needs the coordinates of the system: "
                "PeriodicPositions(GeneralizedCoordinates.from_optimizable(system))"
            )
        if _fixed_axes(self.coordinates.atoms):
            raise ValueError(
                "FixCartesian (or FixedPlane, FixedLine) holds coordinates along fixed "
                "axes, which the periodic "
                "kernel's springs do not separate: use kernel='cartesian' (the default "
                "with FixCartesian), or FixAtoms"
            )

    def metric(self, positions, numbers, centre, model, current):
        if current is not None and current[0] == centre:
            return current, ()
        springs = model
        if not isinstance(springs, ExpSprings):
            springs = ExpSprings(self.coordinates.configuration(positions[centre]))
        metric = PeriodicMetric.from_model(springs, self.coordinates, positions[centre], self.power)
        return (centre, metric), ()


def _model(model, reference, numbers):
    """``model``, or the Lindh model of ``reference`` (n, 3) where it is None."""
    return LindhModel(reference, numbers) if model is None else model


def _aligned_metric(reference, numbers, model):
    """The Hessian metric of the Lindh model at ``reference`` (n, 3), aligned unless the
    molecule is near-linear."""
    model = _model(model, reference, numbers)
    return HessianMetric.from_model(model, reference, align=not is_near_linear(reference))


REPRESENTATIONS = {
    "internal": InternalCoordinates,
    "anisotropic": AlignedPositions,
    "svd": SVDRepresentation,
    "cartesian": CartesianPositions,
    "inverse": InverseDistancePositions,
    "periodic": PeriodicPositions,
}
"""The representation of each name of the optimizer's ``kernel``."""


def make_representation(kernel, system):
    """The :class:`Representation` of the optimizer's ``kernel`` argument for ``system``.

    Parameters
    ----------
    kernel : None, str or Representation
        None: periodic positions for a periodic cell or a cell filter, Cartesian
        positions with FixCartesian (or a single atom), internal coordinates for a
        molecule they describe, aligned positions otherwise. A name of
        :data:`REPRESENTATIONS`, or a representation object.
    system : ase.Atoms or cell filter
        A cell filter takes ``'periodic'`` or ``'cartesian'`` only.

    Raises
    ------
    ValueError
        For another name, or a representation that cannot describe ``system``.
    """
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    atoms = coordinates.atoms
    periodic = coordinates.has_cell or np.any(atoms.pbc)
    if kernel is None:
        if _fixed_axes(atoms):
            return CartesianPositions()
        if periodic:
            return PeriodicPositions(coordinates)
        if len(atoms) < 2:
            return CartesianPositions()
        return InternalCoordinates() if describes(atoms) else AlignedPositions()
    if not isinstance(kernel, Representation):
        if not isinstance(kernel, str) or kernel not in REPRESENTATIONS:
            raise ValueError(
                "kernel must be 'internal', 'anisotropic', 'svd', 'cartesian', 'inverse', "
                f"'periodic' or a Representation, got {kernel!r}"
            )
        kernel = (
            PeriodicPositions(coordinates)
            if kernel == PeriodicPositions.name
            else REPRESENTATIONS[kernel]()
        )
    if coordinates.has_cell and not isinstance(kernel, (PeriodicPositions, CartesianPositions)):
        raise ValueError(
            f"the {kernel.name} kernel describes a molecule, not a cell filter's positions "
            "and cell: use kernel='periodic' (the default) or 'cartesian'"
        )
    kernel.check(atoms)
    return kernel
