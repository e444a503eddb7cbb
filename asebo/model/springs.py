r"""Pair springs with the force constants of Packwood's ``Exp`` preconditioner.

Packwood et al. (J. Chem. Phys. 144, 164109 (2016), eq. 13 and Sec. III) precondition
relaxations of solids and surfaces with the graph Laplacian of the pairs within
``r_cut = 2 r_NN`` (``r_NN`` the nearest-neighbour distance), each pair weighted

.. math:: k_{ij} = \mu \exp\big(-A (r_{ij} / r_{NN} - 1)\big), \qquad A = 3.

:class:`ExpSprings` is the harmonic energy with these constants around a reference
configuration, its pair vectors taken with the minimum image convention:

.. math:: E = \tfrac12 \sum_{\langle ij \rangle} k_{ij} \big[(1 - \tau)
          (|d_{ij}| - |d^0_{ij}|)^2 + \tau |d_{ij} - d^0_{ij}|^2\big].

Each pair of the reference neighbour list (one pair per periodic image within the
cutoff) keeps its image: in a configuration its vector is ``s_j - s_i + S``
(fractional coordinates, ``S`` integer along periodic axes) with ``S`` the lattice
vector that undoes a wrap (:func:`lattice_wrap`), so wrapping an atom across the
boundary or choosing other lattice vectors does not change the energy, and an atom
that hops half a lattice vector of a small cell keeps its springs. With ``tau = 0``
the springs are central (invariant to rotations of cell and atoms together; at the
reference the Hessian block of a pair is ``k u u^T``); with ``tau = 1`` the Hessian is
Packwood's ``mu L ⊗ I_3``. The model is an ASE calculator (energy, forces and
stress), so it serves as the GP's prior mean through
:class:`asebo.model.gp.CalculatorPrior` and under ASE's cell filters.

The scale ``mu``: Packwood fits it to a finite difference of the target's forces
along a long-wavelength displacement. Here no target call is spent on it:
:data:`SPRING_CONSTANT` is the geometric mean over rattled fcc metals (Al, Ni, Cu,
Pd, Ag, Pt, Au; 16-atom bulk and 12-atom (111) slabs) of the ``mu`` that reproduces
EMT's Hessian by least squares of the logarithms of its Rayleigh quotients along
random displacements (:func:`fitted_spring_constant`), with ``r_NN`` the shortest
distance. The model takes ``r_NN`` as the largest of the atoms' nearest-neighbour
distances, as ASE's ``Exp`` preconditioner does (:func:`typical_neighbour_distance`:
an interstitial's close pair does not soften every other spring); the same fit then
gives a slightly smaller mean, and 1.4 is kept (the fitted constants per metal, and
the calls each choice of ``r_NN`` takes on ``asebo bench bulk``, in
docs/notes/periodic-tuning.md). With transverse springs each pair's Hessian block has
trace ``k (1 + 2 tau)``, and the fitted constants follow ``1.4 / (1 + 2 tau)``
(0.87 at ``tau = 0.3``, 0.46 at 1), the default scale.

Molecules on surfaces are both: ``Exp`` knows one bond length, ``r_NN``, and gives a
C-O or O-H bond of an adsorbate 2 to 5 times the metal's constant, where a covalent
bond is 20 to 80 times stiffer. A pair of two atoms that bond covalently
(:data:`COVALENT_ELEMENTS`) takes the larger of its ``Exp`` constant and the stretch
constant of Lindh's model Hessian for molecules, ``k_r rho_ij``
(:func:`asebo.model.lindh.pair_weights`; Lindh et al., Chem. Phys. Lett. 241, 423
(1995)): bonded pairs take Lindh's, the 1-3 pairs that hold a molecule's bends keep
``Exp``'s. Pairs with a metal atom keep ``Exp``'s.
"""

import numpy as np
import torch
from ase.calculators.calculator import Calculator, all_changes
from ase.data import atomic_numbers
from ase.neighborlist import neighbor_list

from asebo.model.closest_approach import CLOSEST_APPROACH  # Å: closer is refused
from asebo.model.lindh import STRETCH_CONSTANT, pair_weights

EXP_A = 3.0  # Packwood's A in exp(-A (r / r_NN - 1))
CUTOFF = 2.0  # Packwood's r_cut / r_NN
SPRING_CONSTANT = 1.4  # mu, eV/Å², of central springs (tau = 0) at r_NN (module docstring)


class NoNeighboursError(ValueError):
    """No two atoms or periodic images lie within 10 Å: pair springs have no pair."""


COVALENT_ELEMENTS = frozenset(
    atomic_numbers[symbol]
    for symbol in ("H", "B", "C", "N", "O", "F", "Si", "P", "S", "Cl", "As", "Se", "Br", "I")
)
"""Atomic numbers of the elements whose pairs take Lindh's stretch constant where it is
larger (module docstring)."""


WRAP = 0.75
"""The fractional offset from a reference beyond which :func:`lattice_wrap` takes the next
lattice image."""


def lattice_wrap(offset):
    """The integer lattice vectors (same shape) that bring fractional ``offset`` (a
    tensor, a configuration's less a reference's) back from a wrap: 0 within
    :data:`WRAP` of a lattice vector's length, the nearest integer beyond.

    Positions within a run move continuously, so that an offset of a whole lattice
    vector is a wrap (an input written wrapped into its cell), while an atom that hops
    half a vector of a small cell reaches a site as far from its reference either way:
    a cut at half the vector (the nearest image) would give that site the values of
    the other way, a lattice vector from those of the path that leads to it.
    """
    return torch.where(offset.abs() < WRAP, 0.0, torch.round(offset))


def nearest_neighbour_distance(atoms):
    """The shortest distance (Å) between two atoms or periodic images in ``atoms``.

    Raises
    ------
    NoNeighboursError
        When no two atoms (or images) are within 10 Å.
    ValueError
        When two are closer than :data:`CLOSEST_APPROACH`.
    """
    distances = neighbor_list("d", atoms, 10.0)
    if len(distances) == 0:
        raise NoNeighboursError(
            "no two atoms or periodic images lie within 10 Å: pair springs need neighbours"
        )
    shortest = float(distances.min())
    if shortest < CLOSEST_APPROACH:
        raise ValueError(
            f"two atoms are {shortest:.3f} Å apart (across the boundary?): separate them"
        )
    return shortest


def typical_neighbour_distance(atoms):
    """``r_NN`` (Å) as Packwood et al. and ASE's ``Exp`` preconditioner estimate it: the
    largest over the atoms of each atom's nearest-neighbour distance (periodic images
    included), so that one close pair (an interstitial, an adsorbate) does not make
    every other bond look long; atoms with no neighbour within 10 Å are left out.

    Raises
    ------
    ValueError
        Where :func:`nearest_neighbour_distance` does.
    """
    nearest_neighbour_distance(atoms)
    i, distances = neighbor_list("id", atoms, 10.0)
    nearest = np.full(len(atoms), np.inf)
    np.minimum.at(nearest, i, distances)
    return float(nearest[np.isfinite(nearest)].max())


def _completed_cell(atoms):
    """The cell (3, 3) with any zero vector of a non-periodic axis made a unit vector
    orthogonal to the others, so that fractional coordinates exist."""
    cell = np.array(atoms.cell.complete())
    if abs(np.linalg.det(cell)) < 1e-9:
        raise ValueError("the cell has zero volume: give every lattice vector a length")
    return cell


class ExpSprings(Calculator):
    """Harmonic pair springs with Packwood's ``Exp`` force constants (module docstring).

    Parameters
    ----------
    reference : ase.Atoms
        The configuration (positions, cell, ``pbc``) where every spring is at rest.
    spring_constant : float, optional
        ``mu``, eV/Å²: the constant of a pair at the nearest-neighbour distance;
        by default ``SPRING_CONSTANT / (1 + 2 tau)``.
    exponent : float
        Packwood's ``A``.
    cutoff : float
        Pairs within ``cutoff * r_NN`` at the reference get a spring.
    transverse : float
        ``tau`` in [0, 1]: 0 central springs, 1 Packwood's isotropic ``mu L ⊗ I_3``.
    covalent : bool
        Pairs of two :data:`COVALENT_ELEMENTS` take the larger of their ``Exp``
        constant and Lindh's stretch constant (module docstring).

    References
    ----------
    D. Packwood, J. Kermode, L. Mones, N. Bernstein, J. Woolley, N. Gould, C. Ortner,
    G. Csányi, "A universal preconditioner for simulating condensed phase materials",
    J. Chem. Phys. 144, 164109 (2016), eq. 13.
    """

    implemented_properties = ("energy", "free_energy", "forces", "stress")

    def __init__(
        self,
        reference,
        spring_constant=None,
        exponent=EXP_A,
        cutoff=CUTOFF,
        transverse=0.0,
        covalent=True,
    ):
        super().__init__()
        if not 0.0 <= transverse <= 1.0:
            raise ValueError(f"transverse must lie in [0, 1], got {transverse!r}")
        if spring_constant is None:
            spring_constant = SPRING_CONSTANT / (1.0 + 2.0 * transverse)
        self.spring_constant = float(spring_constant)
        self.nearest_neighbour = typical_neighbour_distance(reference)
        self.transverse = float(transverse)
        self.n_atoms = len(reference)
        self.pbc = torch.as_tensor(np.asarray(reference.pbc, dtype=np.float64))  # (3,)
        i, j, shifts = neighbor_list("ijS", reference, cutoff * self.nearest_neighbour)
        cell = _completed_cell(reference)
        fractional = np.linalg.solve(cell.T, reference.positions.T).T  # (n, 3)
        self.i, self.j = torch.as_tensor(i), torch.as_tensor(j)  # (p,)
        # ordered pairs: each spring appears as (i, j) and (j, i)
        self.reference_difference = torch.as_tensor(fractional[j] - fractional[i])  # (p, 3)
        self.reference_shifts = torch.as_tensor(shifts, dtype=torch.float64)  # (p, 3)
        self.reference_fractional = self.reference_difference + self.reference_shifts
        self.reference_vectors = self.reference_fractional @ torch.as_tensor(cell)  # (p, 3)
        self.reference_lengths = self.reference_vectors.norm(dim=-1)  # (p,)
        self.constants = spring_constant * torch.exp(
            -exponent * (self.reference_lengths / self.nearest_neighbour - 1.0)
        )  # (p,)
        if covalent:
            numbers = reference.numbers
            pairs = np.flatnonzero(
                np.isin(numbers[i], list(COVALENT_ELEMENTS))
                & np.isin(numbers[j], list(COVALENT_ELEMENTS))
            )
            lengths = self.reference_lengths.numpy()[pairs]
            bonds = STRETCH_CONSTANT * pair_weights(numbers[i[pairs]], numbers[j[pairs]], lengths)
            self.constants[pairs] = torch.maximum(self.constants[pairs], torch.as_tensor(bonds))

    def atom_stiffness(self):
        """Each atom's mean stiffness (n,) against its neighbours held fixed, eV/Å²: a
        third of the trace of its springs' Hessian blocks at rest, ``sum_j k_ij (1 +
        2 tau) / 3``. Unlike the Hessian's diagonal it counts the springs to an atom's
        own periodic images, so a supercell gives its atoms the same values."""
        per_pair = self.constants * (1.0 + 2.0 * self.transverse) / 3.0  # (p,)
        return (
            torch.zeros(self.n_atoms, dtype=torch.float64).index_add_(0, self.i, per_pair).numpy()
        )

    def pair_vectors(self, positions, cell):
        """Pair vectors (b, p, 3) of positions (b, n, 3) in cells (b, 3, 3), each the
        reference's periodic image, a wrap undone (:func:`lattice_wrap`;
        differentiable)."""
        fractional = torch.linalg.solve(cell.transpose(-1, -2), positions.transpose(-1, -2))
        fractional = fractional.transpose(-1, -2)  # (b, n, 3)
        difference = fractional[:, self.j] - fractional[:, self.i]  # (b, p, 3)
        wrap = lattice_wrap(self.reference_difference - difference.detach())
        image = (self.reference_shifts + wrap) * self.pbc
        return (difference + image) @ cell

    def energy(self, positions, cell):
        """Energies (b,) of positions (b, n, 3) in cells (b, 3, 3), eV."""
        vectors = self.pair_vectors(positions, cell)  # (b, p, 3)
        stretch = vectors.norm(dim=-1) - self.reference_lengths  # (b, p)
        terms = (1.0 - self.transverse) * stretch**2
        if self.transverse > 0.0:
            terms = terms + self.transverse * (vectors - self.reference_vectors).pow(2).sum(-1)
        return 0.25 * (self.constants * terms).sum(-1)  # ordered pairs count twice

    def energy_forces_stress(self, positions, cell):
        """Energy, forces (n, 3) and stress (6,) in Voigt order (xx, yy, zz, yz, xz, xy),
        eV/Å³, of one configuration (numpy arrays); also where gradients are off (a
        model's prediction under ``torch.no_grad``)."""
        x = torch.as_tensor(np.asarray(positions, dtype=np.float64))[None].requires_grad_(True)
        c = torch.as_tensor(np.asarray(cell, dtype=np.float64))[None]
        strain = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
        with torch.enable_grad():
            deformation = torch.eye(3, dtype=torch.float64) + 0.5 * (strain + strain.T)
            energy = self.energy(x @ deformation, c @ deformation)[0]
            gradient, virial = torch.autograd.grad(energy, (x, strain))
        sigma = virial.numpy() / abs(np.linalg.det(cell))
        stress = np.array(
            [sigma[0, 0], sigma[1, 1], sigma[2, 2], sigma[1, 2], sigma[0, 2], sigma[0, 1]]
        )
        return float(energy.detach()), -gradient[0].numpy(), stress

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if len(self.atoms) != self.n_atoms:
            raise ValueError(
                f"these springs join {self.n_atoms} atoms; the system has {len(self.atoms)}"
            )
        energy, forces, stress = self.energy_forces_stress(
            self.atoms.positions, _completed_cell(self.atoms)
        )
        self.results = {
            "energy": energy,
            "free_energy": energy,
            "forces": forces,
            "stress": stress,
        }


def fitted_spring_constant(atoms, reference_hessian, transverse=0.0, samples=200, seed=0):
    """``mu`` (eV/Å²) whose springs best reproduce ``reference_hessian`` (3n, 3n) of
    ``atoms`` along random displacements: least squares of the Rayleigh quotients'
    logarithms, ``log mu = mean(log(v^T H_ref v) - log(v^T H_1 v))``."""
    springs = ExpSprings(atoms, spring_constant=1.0, transverse=transverse)
    unit = springs_hessian(springs, atoms.positions, _completed_cell(atoms))
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(samples, 3 * len(atoms)))  # (s, 3n)
    v = (v.reshape(samples, -1, 3) - v.reshape(samples, -1, 3).mean(axis=1, keepdims=True)).reshape(
        samples, -1
    )  # no translation
    target = np.einsum("si,ij,sj->s", v, reference_hessian, v)
    model = np.einsum("si,ij,sj->s", v, unit, v)
    keep = (target > 0) & (model > 0)
    return float(np.exp(np.mean(np.log(target[keep]) - np.log(model[keep]))))


def springs_hessian(springs, positions, cell, deformation=None):
    r"""Hessian (3n, 3n) of ``springs`` in the atoms' positions at a fixed cell, eV/Å².

    With ``deformation`` ``M`` (3, 3) the variables are ``X`` with positions ``X M``
    and cell ``C_0 M`` (a cell filter's atoms; ``cell`` is then ``C_0 M``): each pair's
    block is ``M h M^T``. Closed form: a pair's energy ``e(d)`` has the Hessian

    .. math:: h = \tfrac12 k \big[(1 - \tau)\big(\hat d \hat d^T + (1 - |d^0| / |d|)
              (I - \hat d \hat d^T)\big) + \tau I\big]

    (ordered pairs, a half each), entering the blocks ``ii`` and ``jj`` with ``+`` and
    ``ij``, ``ji`` with ``-``.

    Parameters
    ----------
    springs : ExpSprings
    positions : array (n, 3)
        The atoms' positions (``X M`` with a deformation).
    cell : array (3, 3)
    deformation : array (3, 3), optional
    """
    x = torch.as_tensor(np.asarray(positions, dtype=np.float64))[None]
    c = torch.as_tensor(np.asarray(cell, dtype=np.float64))[None]
    d = springs.pair_vectors(x, c)[0].numpy()  # (p, 3)
    length = np.linalg.norm(d, axis=-1)  # (p,)
    unit = d / length[:, None]
    outer = unit[:, :, None] * unit[:, None, :]  # (p, 3, 3)
    tension = 1.0 - springs.reference_lengths.numpy() / length  # (p,)
    identity = np.eye(3)
    tau = springs.transverse
    blocks = (1.0 - tau) * (outer + tension[:, None, None] * (identity - outer)) + tau * identity
    blocks = 0.5 * springs.constants.numpy()[:, None, None] * blocks  # (p, 3, 3)
    if deformation is not None:
        m = np.asarray(deformation, dtype=np.float64)
        blocks = m @ blocks @ m.T
    n = springs.n_atoms
    i, j = springs.i.numpy(), springs.j.numpy()
    hessian = np.zeros((n, n, 3, 3))
    np.add.at(hessian, (i, i), blocks)
    np.add.at(hessian, (j, j), blocks)
    np.add.at(hessian, (i, j), -blocks)
    np.add.at(hessian, (j, i), -blocks)
    return hessian.transpose(0, 2, 1, 3).reshape(3 * n, 3 * n)
