r"""A metric and a prior mean for periodic cells: slabs, bulk, and cells under a filter.

On molecules the GP wins with lengths per direction from a model Hessian and a
harmonic prior mean around a reference (:mod:`asebo.model.metric`,
:class:`asebo.model.priors.RecentredLindh`). For solids and surfaces the model is
:class:`asebo.model.springs.ExpSprings`, pair springs with the force constants of
Packwood et al.'s ``Exp`` preconditioner (J. Chem. Phys. 144, 164109 (2016)), taken
in the coordinates the optimizer moves
(:class:`asebo.model.cell_coordinates.GeneralizedCoordinates`: the atoms, and for a
cell filter the cell's deformation).

:class:`PeriodicMetric` gives the GP features

.. math:: \psi = S^{1/2} V^T Q^T W u(q),

- ``u(q)`` the displacement from the reference, each atom's less the lattice vector
  that a wrap across the boundary adds (:func:`asebo.model.springs.lattice_wrap`: a
  fractional displacement beyond three quarters of a lattice vector is taken to the
  other image, so that a hop of half a small cell's vector, which reaches a site
  equally far either way, stays on the side it went) and the cell rows' as they are;
- ``W`` the base metric: 1 for atoms; ``w = n r_NN^2 / c^2`` for the cell rows, with
  ``c`` the filter's strain scale: a strain ``epsilon`` weighs as much as every atom
  moving by ``epsilon r_NN`` (how much each neighbour vector changes), so that the
  ``2 x 1 x 1`` supercell of a configuration has twice its squared distances, as its
  atoms do;
- ``Q`` an orthonormal basis of the coordinates the model describes: the free atoms
  (:class:`ase.constraints.FixAtoms` removes the others: a slab with fixed layers is a
  smaller problem), less the three uniform translations when no atom is fixed (a
  periodic cell has no rotations), and the symmetric part of the cell's deformation
  (its antisymmetric part rotates cell and atoms together);
- ``Q^T W^{-1} H W^{-1} Q = V \Lambda V^T`` the model Hessian there, and ``S =
  (\max(\Lambda, f \bar h) / \bar h)^{p}`` with ``\bar h`` the free atoms' mean
  stiffness (:meth:`asebo.model.springs.ExpSprings.atom_stiffness`, intensive: a
  supercell has the same), ``p`` and ``f`` the power and floor of
  :mod:`asebo.model.metric` (Raggi et al., J. Chem. Theory Comput. 16, 3989 (2020)).

The features are linear in ``q`` between wraps, so the map of gradients is a constant
matrix: ``\nabla_q = J^T \nabla_\psi`` with ``J = S^{1/2} V^T Q^T W``, and an observed
gradient maps to ``\nabla_\psi = (J^T)^+ \nabla_q``. Only the described coordinates
enter: the ``r`` features come in rows of three, ``(ceil(r / 3), 3)``, the last one
padded with at most two zeros, so that fixed atoms cost the GP nothing.

The prior: :class:`RecentredSprings` (springs around the first configuration, rebuilt
around the lowest-energy one when the model puts it ``recentre`` eV above its
minimum, as :class:`asebo.model.priors.RecentredLindh`) or a cheap calculator,
:func:`calculator_prior`; :func:`automatic_periodic_prior` chooses between EMT and
the springs.
"""

import importlib.util

import numpy as np
import torch

from asebo.model import prior_calculators
from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.default_prior import wrapped_by
from asebo.model.metric import EIGENVALUE_FLOOR, POWER
from asebo.model.priors import CalculatorPrior, Prior
from asebo.model.springs import (
    ExpSprings,
    lattice_wrap,
    nearest_neighbour_distance,
    springs_hessian,
)

EMT_METALS = ("Al", "Ni", "Cu", "Pd", "Ag", "Pt", "Au")
"""Elements ASE's EMT describes as metals; its parameters for H, C, N and O are rough."""


def generalized_energy(springs, coordinates, positions):
    """Energies (b,) of ``springs`` at generalized positions (b, N, 3), the filter's
    ``p V`` term included, differentiable."""
    r, cell = coordinates.positions_and_cell(positions)
    energy = springs.energy(r, cell)
    if coordinates.pressure:
        energy = energy + coordinates.pressure * coordinates.volume(cell)
    return energy


def generalized_hessian(springs, coordinates, reference):
    """Hessian (3N, 3N) of ``springs`` in the generalized coordinates at ``reference``
    (N, 3) (eV/Å² for atoms).

    The atoms' block in closed form (:func:`asebo.model.springs.springs_hessian`, the
    deformation ``M`` of the cell held), the cell's rows (coupling included) by
    automatic differentiation of the gradient: nine backward passes, not ``3N``.
    """
    q0 = torch.as_tensor(np.asarray(reference, dtype=np.float64))[None]
    n, rows = coordinates.n_atoms, coordinates.rows
    with torch.no_grad():
        r, cell = coordinates.positions_and_cell(q0)
    deformation = torch.linalg.solve(torch.as_tensor(coordinates.frame), cell[0]).numpy()
    hessian = np.zeros((3 * rows, 3 * rows))
    hessian[: 3 * n, : 3 * n] = springs_hessian(
        springs, r[0].numpy(), cell[0].numpy(), deformation if coordinates.has_cell else None
    )
    if coordinates.has_cell:
        q = q0.clone().requires_grad_(True)
        (gradient,) = torch.autograd.grad(
            generalized_energy(springs, coordinates, q)[0], q, create_graph=True
        )
        gradient = gradient.reshape(-1)  # (3N,)
        for k in range(3 * n, 3 * rows):
            (row,) = torch.autograd.grad(gradient[k], q, retain_graph=True)
            hessian[k] = row.reshape(-1).numpy()
            hessian[: 3 * n, k] = hessian[k, : 3 * n]
    return 0.5 * (hessian + hessian.T)


def _symmetric_basis():
    """Orthonormal basis (9, 6) of the symmetric 3 x 3 matrices, flattened."""
    basis = []
    for a in range(3):
        for b in range(a, 3):
            e = np.zeros((3, 3))
            e[a, b] = e[b, a] = 1.0
            basis.append(e.reshape(-1) / np.linalg.norm(e))
    return np.array(basis).T


def described_basis(coordinates):
    """``Q`` (3N, r): orthonormal basis of the free atoms (less the translations when
    no atom is fixed) and of the cell's symmetric deformation."""
    n, rows = coordinates.n_atoms, coordinates.rows
    free = np.setdiff1d(np.arange(n), coordinates.fixed)
    atoms = np.zeros((3 * rows, 3 * len(free)))
    atoms[(3 * free[:, None] + np.arange(3)).reshape(-1), np.arange(3 * len(free))] = 1.0
    if len(coordinates.fixed) == 0 and n > 0:
        translations = np.zeros((3 * rows, 3))
        translations[: 3 * n] = np.tile(np.eye(3), (n, 1)) / np.sqrt(n)
        projected = atoms - translations @ (translations.T @ atoms)
        u, s, _ = np.linalg.svd(projected, full_matrices=False)
        atoms = u[:, s > 0.5]  # singular values are 1, or 0 for the translations
    if not coordinates.has_cell:
        return atoms
    cell = np.zeros((3 * rows, 6))
    cell[3 * n :] = _symmetric_basis()
    return np.concatenate([atoms, cell], axis=1)


class PeriodicMetric:
    """Features of generalized positions from a model Hessian (module docstring).

    Parameters
    ----------
    coordinates : GeneralizedCoordinates
    reference : array (N, 3)
        Generalized positions where ``hessian`` was taken.
    hessian : array (3N, 3N)
        Model Hessian in the generalized coordinates.
    nearest_neighbour : float
        ``r_NN``, Å: the length a unit strain moves a neighbour by.
    power : float
        The metric is the Hessian to this power; 0 gives the base metric.
    stiffness : float, optional
        ``\bar h``, eV/Å², the eigenvalue that gets scale 1; by default the mean of the
        free atoms' diagonal of ``hessian`` (or of the whole, where that is zero).

    Attributes
    ----------
    jacobian : tensor (r, 3N)
        ``J``: features are ``J u(q)``.
    scales : array (r,)
        ``S``, ascending with the model's stiffness.
    """

    def __init__(
        self, coordinates, reference, hessian, nearest_neighbour, power=POWER, stiffness=None
    ):
        self.coordinates = coordinates
        self.reference = torch.as_tensor(np.asarray(reference, dtype=np.float64))  # (N, 3)
        rows, n = coordinates.rows, coordinates.n_atoms
        weights = np.ones(3 * rows)  # (3N,)
        if coordinates.has_cell:
            weights[3 * n :] = n * nearest_neighbour**2 / coordinates.strain_scale**2
        root = np.sqrt(weights)
        basis = described_basis(coordinates)  # (3N, r)
        if basis.shape[1] == 0:
            raise ValueError("every atom is fixed and there is no cell: nothing to relax")
        weighted = np.asarray(hessian) / root[:, None] / root[None, :]
        reduced = basis.T @ weighted @ basis  # (r, r)
        free = np.setdiff1d(np.arange(n), coordinates.fixed)
        atom_diagonal = weighted.diagonal()[(3 * free[:, None] + np.arange(3)).reshape(-1)]
        mean = stiffness
        if mean is None:
            mean = atom_diagonal.mean() if atom_diagonal.size else 0.0
        if mean <= 0.0:
            mean = max(float(np.trace(reduced)) / len(reduced), 0.0)
        eigenvalues, vectors = np.linalg.eigh(reduced)
        if mean <= 0.0:  # no springs: the base metric
            self.scales = np.ones(len(eigenvalues))
        else:
            self.scales = (np.clip(eigenvalues, EIGENVALUE_FLOOR * mean, None) / mean) ** power
        jacobian = np.sqrt(self.scales)[:, None] * (vectors.T @ basis.T) * root[None, :]
        self.jacobian = torch.as_tensor(jacobian)  # (r, 3N)
        self._gradient_map = torch.linalg.pinv(self.jacobian.T)  # (r, 3N)
        self._frame = torch.as_tensor(coordinates.frame)
        self._pbc = torch.as_tensor(coordinates.pbc, dtype=torch.float64)

    @classmethod
    def from_model(cls, springs, coordinates, reference, power=POWER):
        """The metric of ``springs``' Hessian at generalized positions ``reference``."""
        hessian = generalized_hessian(springs, coordinates, reference)
        free = np.setdiff1d(np.arange(coordinates.n_atoms), coordinates.fixed)
        stiffness = float(springs.atom_stiffness()[free].mean()) if len(free) else None
        return cls(coordinates, reference, hessian, springs.nearest_neighbour, power, stiffness)

    def displacements(self, positions):
        """``u`` (b, N, 3) of generalized positions (b, N, 3): each atom's displacement
        from the reference less the lattice vectors of a wrap
        (:func:`asebo.model.springs.lattice_wrap`; differentiable)."""
        q = torch.as_tensor(positions, dtype=torch.float64)
        u = q - self.reference
        n = self.coordinates.n_atoms
        fractional = torch.linalg.solve(self._frame.T, u[:, :n].transpose(-1, -2))
        image = lattice_wrap(fractional.transpose(-1, -2).detach()) * self._pbc  # (b, n, 3)
        atoms = u[:, :n] - image @ self._frame
        return torch.cat([atoms, u[:, n:]], dim=1)

    @property
    def feature_rows(self):
        """``ceil(r / 3)``: the rows of three of the features."""
        return -(-len(self.jacobian) // 3)

    def _in_rows(self, values):
        """``values`` (m, r) padded to rows of three, (m, ceil(r / 3), 3)."""
        out = values.new_zeros(len(values), 3 * self.feature_rows)
        out[:, : values.shape[1]] = values
        return out.reshape(len(values), self.feature_rows, 3)

    def features(self, positions):
        """``psi`` (m, ceil(r / 3), 3) of generalized positions (m, N, 3)."""
        u = self.displacements(positions)
        return self._in_rows(u.reshape(len(u), -1) @ self.jacobian.T)

    def feature_gradients(self, positions, gradients):
        """Gradients (m, ceil(r / 3), 3) in ``psi`` of functions of the features whose
        gradients in the generalized positions (m, N, 3) are ``gradients``."""
        g = torch.as_tensor(gradients, dtype=torch.float64)
        return self._in_rows(g.reshape(len(g), -1) @ self._gradient_map.T)

    def features_and_pullback(self, positions):
        """``psi`` (b, ceil(r / 3), 3) of positions (b, N, 3), and the map of gradients
        in ``psi`` (b, ceil(r / 3), 3) to gradients in the positions (b, N, 3)."""
        features = self.features(positions)
        r, rows = len(self.jacobian), self.coordinates.rows

        def pullback(*feature_gradients):
            return tuple(
                (g.reshape(len(g), -1)[:, :r] @ self.jacobian).reshape(len(g), rows, 3)
                for g in feature_gradients
            )

        return features, pullback


def calculator_prior(calculator, system):
    """A :class:`asebo.model.priors.CalculatorPrior` of ``calculator`` in the coordinates
    of ``system`` (atoms, or a cell filter: generalized positions, forces with the
    virial)."""
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    prior = CalculatorPrior(calculator, coordinates.atoms)
    prior.atoms = coordinates.new_filter(prior.atoms)
    return prior


class RecentredSprings(Prior):
    """The pair-spring prior of a sequence of observations, rebuilt as they move away.

    The counterpart of :class:`asebo.model.priors.RecentredLindh` for periodic cells:
    :class:`asebo.model.springs.ExpSprings` around the first configuration, rebuilt
    around the lowest-energy one once they put it more than ``recentre`` eV above
    their minimum; the rule is replayed over the observations in order, so a resumed
    run rebuilds the model of the uninterrupted one.

    Parameters
    ----------
    system : ase.Atoms or cell filter
    recentre : float
        Energy above the model's minimum, eV, beyond which the springs are rebuilt
        around the lowest-energy observation.
    transverse : float
        ``tau`` of :class:`asebo.model.springs.ExpSprings`.

    Attributes
    ----------
    springs : ExpSprings or None
        The current model, once an observation exists.
    centre : int or None
        Index of the observation it is built around.
    """

    label = "springs"

    def __init__(self, system, recentre, transverse=0.0):
        self.system = system
        self.coordinates = GeneralizedCoordinates.from_optimizable(system)
        self.recentre = recentre
        self.transverse = transverse
        self.springs = None
        self.centre = None
        self._prior = None
        self._seen = 0

    def check(self, atoms):
        """Raise ValueError where two atoms are closer than
        :data:`asebo.model.springs.CLOSEST_APPROACH` (across the boundary too), and
        :class:`asebo.model.springs.NoNeighboursError` where none has a neighbour within
        10 Å."""
        nearest_neighbour_distance(atoms)

    def metric_reference(self):
        """Index of the observation the springs are built around, and the springs."""
        return self.centre, self.springs

    def for_observations(self, positions, energies, forces=None):
        """The prior for observations at generalized ``positions`` (m, N, 3) with
        ``energies`` (m,): a :class:`asebo.model.priors.CalculatorPrior` of the springs
        (``forces`` unused)."""
        while self._seen < len(energies):
            self._seen += 1
            best = int(np.argmin(energies[: self._seen]))
            if self.springs is None:
                self._build(positions, 0)
            elif self._prior.energy_and_forces(positions[best])[0] > self.recentre:
                self._build(positions, best)
        return self._prior

    def _build(self, positions, index):
        reference = self.coordinates.configuration(positions[index])
        self.springs = ExpSprings(reference, transverse=self.transverse)
        self.centre = index
        self._centre = np.array(positions[index], dtype=np.float64)  # (N, 3)
        self._prior = calculator_prior(self.springs, self.system)

    def metric(self, power=POWER):
        """The :class:`PeriodicMetric` of the current springs at their centre."""
        if self.springs is None:
            raise ValueError("no observation yet: call for_observations() first")
        return PeriodicMetric.from_model(self.springs, self.coordinates, self._centre, power)


def automatic_periodic_prior(system, recentre):
    """The prior ``prior='auto'`` takes for a periodic ``system``, and why.

    EMT (ASE's, K. W. Jacobsen, P. Stoltze, J. K. Nørskov, Surf. Sci. 366, 394 (1996))
    when every element is one of its metals (:data:`EMT_METALS`) and the target is
    not EMT itself; otherwise CHGNet (B. Deng et al., Nat. Mach. Intell. 5, 1031
    (2023); the ``chgnet`` calculator preset) where it is installed and is not the
    target; otherwise the pair springs.

    Parameters
    ----------
    system : ase.Atoms or cell filter
        With the target calculator attached to its atoms.
    recentre : float
        The springs' recentring energy, eV.

    Returns
    -------
    prior : asebo.model.priors.CalculatorPrior or RecentredSprings
        EMT or CHGNet in the coordinates of ``system``, or the springs.
    reason : str
        One line for the log.
    """
    from ase.calculators.emt import EMT

    coordinates = GeneralizedCoordinates.from_optimizable(system)
    atoms = coordinates.atoms
    calculator = getattr(atoms, "calc", None)
    springs = RecentredSprings(system, recentre)
    if calculator is not None and wrapped_by(calculator, ("emt",)):
        return springs, "pair springs (Exp force constants): the target is EMT itself"
    others = sorted(set(atoms.get_chemical_symbols()) - set(EMT_METALS))
    if not others:
        return calculator_prior(EMT(), system), "EMT as the prior; the GP learns the difference"
    beyond = f"EMT has no metal parameters for {others}"
    if calculator is not None and wrapped_by(calculator, ("chgnet",)):
        return springs, f"pair springs (Exp force constants): {beyond}, and the target is CHGNet"
    if importlib.util.find_spec("chgnet") is None:
        return (
            springs,
            f"pair springs (Exp force constants): {beyond}, and CHGNet is not installed "
            "(pip install 'asebo[ml]')",
        )
    return (
        calculator_prior(prior_calculators.chgnet(), system),
        f"CHGNet as the prior ({beyond}); the GP learns the difference",
    )


SPRINGS = "springs"
"""The name of :class:`RecentredSprings` as the optimizer's ``prior``."""


def make_periodic_prior(prior, system, recentre, transverse=0.0):
    """The :class:`asebo.model.priors.Prior` of the optimizer's ``prior`` argument for a
    periodic ``system`` (atoms or a cell filter), and a reason for the log or None.

    Parameters
    ----------
    prior : None, str, float, ase calculator or Prior
        None or ``'springs'``: :class:`RecentredSprings`. ``'auto'``:
        :func:`automatic_periodic_prior`. A calculator: :func:`calculator_prior` in the
        coordinates of ``system``. ``'max'``, ``'mean'``, a number or a prior object as
        for molecules (:func:`asebo.model.priors.constant_prior`).
    system : ase.Atoms or cell filter
    recentre, transverse : float
        Of :class:`RecentredSprings`.

    Raises
    ------
    ValueError
        For ``'lindh'``, another name, or a number that is not finite.
    """
    from asebo.model.priors import AUTO, constant_prior

    if hasattr(prior, "get_potential_energy") or hasattr(prior, "calculate"):
        return calculator_prior(prior, system), None
    if prior is None or prior == SPRINGS:
        return RecentredSprings(system, recentre, transverse), None
    if isinstance(prior, str) and prior == AUTO:
        return automatic_periodic_prior(system, recentre)
    if isinstance(prior, str) and prior not in ("max", "mean"):
        raise ValueError(
            f"prior {prior!r} does not describe a periodic cell: use 'springs' (the "
            "default), 'auto', 'max', 'mean', a number or a calculator"
        )
    return constant_prior(prior), None
