r"""A harmonic model of a molecule with the force constants of Lindh's model Hessian.

Lindh, Bernhardsson, Karlström and Malmqvist (Chem. Phys. Lett. 241, 423 (1995))
give every pair of atoms a weight that decays with their distance,

.. math:: \rho_{ij} = \exp\big(\alpha_{ij} (r_{\mathrm{ref},ij}^2 - r_{ij}^2)\big),

with ``alpha`` and ``r_ref`` set by the periodic-table rows of the two atoms, and
force constants ``k_r rho_ij`` for the stretch of ``ij``, ``k_phi rho_ij rho_jk``
for the bend of ``i-j-k`` and ``k_tau rho_ij rho_jk rho_kl`` for the torsion about
``j-k`` of ``i-j-k-l``. :class:`LindhModel` is the harmonic energy with these force
constants around a reference geometry ``x0`` (``k_tau`` twice Lindh's by
default, see ``TORSION_CONSTANT``):

.. math:: E(x) = \tfrac12 k_r \sum_{ij} \rho_{ij} (r_{ij} - r^0_{ij})^2
              + \tfrac12 k_\phi \sum_{ijk} \rho_{ij} \rho_{jk} (\theta_{ijk} - \theta^0_{ijk})^2
              + \tfrac12 k_\tau \sum_{ijkl} \rho_{ij} \rho_{jk} \rho_{kl}
                g(\theta_{ijk}) g(\theta_{jkl}) [\tau_{ijkl} - \tau^0_{ijkl}]^2,

the weights taken at ``x0`` and the torsion difference wrapped to (-pi, pi]. A
torsion is undefined where one of its two bends is straight; ``g`` switches it off
smoothly there (1 below 145°, 0 above 160°, a quintic step between, and likewise
for a bend folded towards 0°, as between a bond and a 1-3 pair), and torsions
switched off at ``x0`` are left out. With ``torsion_constant`` Lindh's 0.005 Ha/rad²
its Hessian at ``x0`` is Lindh's model Hessian; its minimum is ``x0``. Optional
out-of-plane terms (``out_of_plane_constant``) hold planar centres harmonically. As
the GP's prior mean it tells the GP that bonds are stiff, bends soft and torsions
softer still before any force has been computed: the GP
then learns the difference, which near the reference is close to linear in the
bond lengths. It is an ASE calculator, so :class:`asebo.model.gp.CalculatorPrior` takes
it unchanged.
"""

import copy
from itertools import combinations

import numpy as np
import torch
from ase.calculators.calculator import Calculator, all_changes
from ase.units import Bohr, Hartree

from asebo.model.internals import (
    AtomScatter,
    bend_angles,
    bond_lengths,
    dihedral_angles,
    faded_torsions,
    torsion_fade,
)

# Lindh et al. (1995), Table 1: alpha (bohr^-2) and r_ref (bohr) by the rows of two atoms
_ALPHA = {
    (1, 1): 1.0000,
    (1, 2): 0.3949,
    (1, 3): 0.3949,
    (2, 2): 0.2800,
    (2, 3): 0.2800,
    (3, 3): 0.2800,
}
_R_REF = {(1, 1): 1.35, (1, 2): 2.10, (1, 3): 2.53, (2, 2): 2.87, (2, 3): 3.40, (3, 3): 3.40}
STRETCH_CONSTANT = 0.45 * Hartree / Bohr**2  # k_r, eV/Å²
BEND_CONSTANT = 0.15 * Hartree  # k_phi, eV/rad²
LINDH_TORSION_CONSTANT = 0.005 * Hartree  # Lindh's k_tau, eV/rad²
# twice Lindh's, chosen side by side with 1, 3 and 4 times under the internal-coordinate
# kernel and its linear trend (docs/lindh.md; the calls in docs/notes/lindh-stiffness.md)
TORSION_CONSTANT = 2 * LINDH_TORSION_CONSTANT  # k_tau, eV/rad²
# a centre with three neighbours counts as planar within this angle of the plane (rad)
PLANAR_TOLERANCE = np.radians(30.0)
BONDED = 0.5  # Lindh weight rho_ij above which i and j are bonded (non-bonded pairs < 0.05)


def _row(number):
    """Periodic-table row, rows beyond the third counted as the third (Lindh et al.)."""
    return 1 if number <= 2 else 2 if number <= 10 else 3


def pair_weights(first, second, distances):
    """Weights ``rho`` of atom pairs of atomic numbers ``first`` and ``second`` at
    ``distances`` (Å), all three arrays of one shape (or broadcast to one)."""
    rows_first = np.vectorize(_row, otypes=[int])(first)
    rows_second = np.vectorize(_row, otypes=[int])(second)
    low, high = np.minimum(rows_first, rows_second), np.maximum(rows_first, rows_second)
    alpha = np.vectorize(lambda a, b: _ALPHA[a, b], otypes=[float])(low, high)  # bohr^-2
    r_ref = np.vectorize(lambda a, b: _R_REF[a, b], otypes=[float])(low, high)  # bohr
    distance = distances / Bohr
    return np.exp(alpha * (r_ref**2 - distance**2))


def lindh_weights(positions, numbers):
    """Pair weights ``rho_ij`` (n, n) of Lindh et al. (1995), zero on the diagonal."""
    numbers = np.asarray(numbers)
    distance = np.linalg.norm(positions[:, None] - positions[None], axis=-1)  # (n, n), Å
    weights = pair_weights(numbers[:, None], numbers[None, :], distance)
    np.fill_diagonal(weights, 0.0)
    return weights


def _torsion_quadruples(rho, cutoff):
    """Rows ``(i, j, k, l)`` (t, 4), each torsion once (``j < k``), of distinct atoms
    whose weight ``rho_ij rho_jk rho_kl`` exceeds ``cutoff``, with the weights (t,)."""
    rows, weights = [], []
    for j, k in zip(*np.nonzero(np.triu(rho > cutoff, k=1))):
        outer = rho[:, j, None] * rho[j, k] * rho[None, k, :]  # (n, n): rho_ij rho_jk rho_kl
        outer[[j, k], :] = 0.0
        outer[:, [j, k]] = 0.0
        np.fill_diagonal(outer, 0.0)  # i == l
        i, l = np.nonzero(outer > cutoff)
        rows.append(np.stack([i, np.full_like(i, j), np.full_like(i, k), l], axis=1))
        weights.append(outer[i, l])
    if not rows:
        return np.zeros((0, 4), dtype=int), np.zeros(0)
    return np.concatenate(rows), np.concatenate(weights)


def out_of_plane_quadruples(rho, cutoff):
    """Rows ``(i, j, k, l)`` (o, 4) of a centre ``j`` and three of its neighbours,
    each trio once, whose weight ``rho_ji rho_jk rho_jl`` exceeds ``cutoff``, with the
    weights (o,). The dihedral of ``i-j-k-l`` measures ``l`` leaving the plane ``i-j-k``."""
    rows, weights = [], []
    for j in range(len(rho)):
        for i, k, l in combinations(np.nonzero(rho[j] > cutoff)[0], 3):
            weight = rho[j, i] * rho[j, k] * rho[j, l]
            if weight > cutoff:
                rows.append([i, j, k, l])
                weights.append(weight)
    return np.array(rows, dtype=int).reshape(-1, 4), np.array(weights)


def _bend_angles(positions, bends):
    """Angles (b,) at the middle atom of ``bends`` (b, 3) at ``positions`` (n, 3)."""
    angles, _ = bend_angles(torch.as_tensor(positions), torch.as_tensor(bends))
    return angles.numpy()


def _dihedral_angles(positions, quadruples):
    """Dihedral angles (t,) of ``quadruples`` (t, 4) at ``positions`` (n, 3)."""
    angles, _ = dihedral_angles(torch.as_tensor(positions), torch.as_tensor(quadruples))
    return angles.numpy()


class LindhModel(Calculator):
    """Harmonic stretches, bends and torsions with Lindh's model force constants around ``x0``.

    Parameters
    ----------
    reference : array (n, 3)
        Positions ``x0`` of the minimum, Å; the weights and the reference bond
        lengths, angles and dihedrals are taken there.
    numbers : array (n,)
        Atomic numbers.
    cutoff : float
        Stretches, bends and torsions whose weight (``rho_ij``, ``rho_ij rho_jk`` or
        ``rho_ij rho_jk rho_kl``) is below ``cutoff`` are left out.
    stretch_constant, bend_constant, torsion_constant : float
        ``k_r`` (eV/Å²), ``k_phi`` and ``k_tau`` (eV/rad²). Lindh's ``k_r`` and
        ``k_phi`` by default, and twice his ``k_tau`` (0.01 Ha/rad²): torsions
        on by default, the GP's prior then knows the soft twists. ``torsion_constant=0``
        leaves the torsions out (the model of stretches and bends alone).
    out_of_plane_constant : float
        ``k_oop`` (eV/rad²) of the out-of-plane dihedrals of centres planar at ``x0``
        (three neighbours within ``PLANAR_TOLERANCE`` of a plane); 0, the default,
        leaves them out.
    reference_angles : array (b,) or callable, optional
        The bends' reference angles, rad, in the order of :attr:`bends`; or a function
        ``f(bends, angles)`` of the bends (b, 3) and their angles at ``reference`` (b,)
        that returns them. By default the angles at ``reference``.

    Attributes
    ----------
    stretches : array (p, 2), stretch_constants : array (p,)
        Atom pairs and force constants ``k_r rho_ij``, eV/Å².
    bends : array (b, 3), bend_constants : array (b,)
        Triples ``(i, j, k)`` with ``j`` in the middle and force constants
        ``k_phi rho_ij rho_jk``, eV/rad².
    torsions : array (t, 4), torsion_constants : array (t,)
        Quadruples ``(i, j, k, l)`` twisting about ``j-k`` and force constants
        ``k_tau rho_ij rho_jk rho_kl``, eV/rad² (before the fade ``g``).
    out_of_plane : array (o, 4), out_of_plane_constants : array (o,)
        Centre ``j`` and neighbours ``i, k, l`` of each out-of-plane dihedral
        ``i-j-k-l``, and force constants ``k_oop rho_ji rho_jk rho_jl``, eV/rad².
    """

    implemented_properties = ["energy", "forces"]

    def __init__(
        self,
        reference,
        numbers,
        cutoff=1e-2,
        stretch_constant=STRETCH_CONSTANT,
        bend_constant=BEND_CONSTANT,
        torsion_constant=TORSION_CONSTANT,
        out_of_plane_constant=0.0,
        reference_angles=None,
    ):
        super().__init__()
        reference, numbers = _checked_reference(reference, numbers)
        rho = lindh_weights(reference, numbers)  # (n, n)
        self.stretches, self.stretch_constants = self._choose_stretches(
            rho, cutoff, stretch_constant
        )
        self.bends, self.bend_constants = self._choose_bends(rho, cutoff, bend_constant)
        self.torsions, self.torsion_constants = self._choose_torsions(
            reference, rho, cutoff, torsion_constant
        )
        self.out_of_plane, self.out_of_plane_constants = self._choose_out_of_plane(
            reference, rho, cutoff, out_of_plane_constant
        )
        self.reference = reference
        self.numbers = numbers
        self.cutoff = cutoff
        self.bend_constant = bend_constant
        self.torsion_constant = torsion_constant
        self._reference_lengths = bond_lengths(
            torch.as_tensor(reference), torch.as_tensor(self.stretches)
        )[0].numpy()
        self._reference_angles = _bend_angles(reference, self.bends)  # (b,)
        if callable(reference_angles):
            reference_angles = reference_angles(self.bends, self._reference_angles)
        if reference_angles is not None:
            self._reference_angles = self._checked_angles(reference_angles)
        self._reference_dihedrals = _dihedral_angles(reference, self.torsions)
        self._reference_out_of_plane = _dihedral_angles(reference, self.out_of_plane)
        n = len(reference)
        self._scatters = {
            "stretches": AtomScatter(self.stretches, n),
            "bends": AtomScatter(self.bends, n),
            "torsions": AtomScatter(self.torsions, n),
            "out_of_plane": AtomScatter(self.out_of_plane, n),
        }

    def _checked_angles(self, reference_angles):
        """``reference_angles`` as an array (b,) of the bends' reference angles."""
        angles = np.array(reference_angles, dtype=np.float64)
        if angles.shape != (len(self.bends),):
            raise ValueError(
                f"reference_angles must hold one angle per bend ({len(self.bends)}), got "
                f"shape {angles.shape}: one per row of the model's bends, in that order"
            )
        return angles

    @property
    def reference_angles(self):
        """The bends' reference angles (b,), rad."""
        return self._reference_angles.copy()

    @staticmethod
    def _choose_stretches(rho, cutoff, stretch_constant):
        """Atom pairs (p, 2) whose weight ``rho_ij`` is above ``cutoff``, and their force
        constants (p,)."""
        i, j = np.nonzero(np.triu(rho > cutoff, k=1))
        return np.stack([i, j], axis=1), stretch_constant * rho[i, j]

    @staticmethod
    def _choose_bends(rho, cutoff, bend_constant):
        """Triples (b, 3), the middle atom second, whose weight ``rho_ij rho_jk`` is above
        ``cutoff``, and their force constants (b,)."""
        triples = rho[:, :, None] * rho[None, :, :]  # (n, n, n): rho_ij rho_jk
        i, j, k = np.nonzero(triples > cutoff)
        keep = i < k  # each bend once; i != j and j != k since rho_jj = 0
        bends = np.stack([i[keep], j[keep], k[keep]], axis=1)  # (b, 3)
        return bends, bend_constant * triples[i[keep], j[keep], k[keep]]

    @staticmethod
    def _choose_torsions(reference, rho, cutoff, torsion_constant):
        """Torsions (t, 4) above ``cutoff`` and not faded out at ``reference``, and
        their force constants (t,)."""
        if torsion_constant == 0:
            return np.zeros((0, 4), dtype=int), np.zeros(0)
        torsions, weights = _torsion_quadruples(rho, cutoff)
        first = torch.as_tensor(_bend_angles(reference, torsions[:, :3]))  # (t,) at j
        second = torch.as_tensor(_bend_angles(reference, torsions[:, 1:]))  # (t,) at k
        defined = ((torsion_fade(first)[0] > 0) & (torsion_fade(second)[0] > 0)).numpy()
        return torsions[defined], torsion_constant * weights[defined]

    @staticmethod
    def _choose_out_of_plane(reference, rho, cutoff, out_of_plane_constant):
        """Out-of-plane dihedrals (o, 4) of centres planar at ``reference`` and above
        ``cutoff``, and their force constants (o,)."""
        if out_of_plane_constant == 0:
            return np.zeros((0, 4), dtype=int), np.zeros(0)
        quadruples, weights = out_of_plane_quadruples(rho, cutoff)
        if len(quadruples) == 0:
            return quadruples, weights
        angle = _dihedral_angles(reference, quadruples)
        planar = np.abs(np.sin(angle)) < np.sin(PLANAR_TOLERANCE)
        return quadruples[planar], out_of_plane_constant * weights[planar]

    def energies_and_gradients(self, positions):
        """Model energies (b,) (eV) and their gradients (b, n, 3) (eV/Å) at positions
        (b, n, 3): one batch of PyTorch operations for every configuration."""
        x = torch.as_tensor(np.asarray(positions, dtype=np.float64))
        scatters = self._scatters
        length, d_length = bond_lengths(x, torch.as_tensor(self.stretches))
        stretch = length - torch.as_tensor(self._reference_lengths)  # (b, p)
        constants = torch.as_tensor(self.stretch_constants)
        energies = 0.5 * (constants * stretch**2).sum(dim=-1)  # (b,)
        terms = [(scatters["stretches"], constants * stretch, d_length)]  # (scatter, dE/dq, dq/dx)
        if len(self.bends):
            angle, d_angle = bend_angles(x, torch.as_tensor(self.bends))
            bend = angle - torch.as_tensor(self._reference_angles)  # (b, t)
            constants = torch.as_tensor(self.bend_constants)
            energies = energies + 0.5 * (constants * bend**2).sum(dim=-1)
            terms.append((scatters["bends"], constants * bend, d_angle))
        for kind, constants, reference in (
            ("torsions", self.torsion_constants, self._reference_dihedrals),
            ("out_of_plane", self.out_of_plane_constants, self._reference_out_of_plane),
        ):
            quadruples = getattr(self, kind)
            if len(quadruples):
                # harmonic twists k g twist^2 / 2, each faded by its two bends
                quadruples, constants = torch.as_tensor(quadruples), torch.as_tensor(constants)
                twist, fade, d_twist, d_fade = faded_torsions(
                    x, quadruples, torch.as_tensor(reference)
                )
                half = 0.5 * constants * twist**2  # (b, t)
                energies = energies + (half * fade).sum(dim=-1)
                terms.append((scatters[kind], constants * twist * fade, d_twist))
                terms.append((scatters[kind], half, d_fade))
        gradients = sum(scatter(*term) for scatter, *term in terms)  # (b, n, 3)
        return energies.numpy(), gradients.numpy()

    def with_capped_bends(self):
        """This model with every bend's weight ``rho_ij rho_jk`` at most 1: no bend stiffer
        than ``k_phi``; the stretches and torsions as they are.

        A weight above 1 comes from a bond shorter than Lindh's reference length for its
        two rows, a double or triple bond. It stiffens the stretch of that bond, as it
        should, and every bend on it too, where the target's bends do not stiffen: the
        curvature of the energy as a hydrogen moves across its C–C bond, in the plane of
        the bend, is 5.9, 5.8 and 1.7 eV/rad² in ethane, ethylene and acetylene with
        GFN2-xTB at its minimum; 6.9, 13.4 and 11.9 with this model at stiffness 1; 6.3,
        8.5 and 4.1 with its bends capped.

        Returns
        -------
        LindhModel
            A new model; this one is left as it is.
        """
        capped = copy.copy(self)
        capped.results = {}
        capped.bend_constants = np.minimum(self.bend_constants, self.bend_constant)
        return capped

    def with_reversed_stretches(self, pairs):
        """This model with the stretches of ``pairs`` (sequence of ``(i, j)``, ``i < j``)
        given negative force constants: a harmonic maximum along those bonds, the rest
        as it is. Pairs the model has no stretch for are left out.

        Returns
        -------
        LindhModel
            A new model; this one is left as it is.
        """
        wanted = {tuple(int(index) for index in pair) for pair in pairs}
        reversed_ = np.array([tuple(pair) in wanted for pair in self.stretches.tolist()], bool)
        model = copy.copy(self)
        model.results = {}
        model.stretch_constants = np.where(
            reversed_, -self.stretch_constants, self.stretch_constants
        )
        return model

    def gauss_newton_hessian(self, positions):
        """``sum_q k_q dq/dx dq/dx^T`` (3n, 3n), eV/Å², at ``positions`` (n, 3): the
        model's Hessian without the terms in ``(q - q0)`` times the second derivatives
        of the primitives ``q`` (each torsion's force constant times its fade ``g``).

        Positive semidefinite everywhere, and the model's exact Hessian at its
        reference, where it is Lindh's model Hessian (Lindh et al., Chem. Phys. Lett.
        241, 423 (1995)). One evaluation of the primitives' derivatives and a product
        of the Wilson B matrix with itself, in place of ``6n`` gradients for central
        differences (the times in docs/notes/large-molecules.md, "The search's
        conditioning").
        """
        x = torch.as_tensor(np.asarray(positions, dtype=np.float64))[None]  # (1, n, 3)
        n = x.shape[1]
        parts = [(self.stretches, self.stretch_constants, bond_lengths)]
        if len(self.bends):
            parts.append((self.bends, self.bend_constants, bend_angles))
        hessian = np.zeros((3 * n, 3 * n))
        for atoms, constants, primitive in parts:
            _, derivatives = primitive(x, torch.as_tensor(atoms))
            hessian += _gram(atoms, constants, derivatives[0].numpy(), n)
        for kind, constants, reference in (
            ("torsions", self.torsion_constants, self._reference_dihedrals),
            ("out_of_plane", self.out_of_plane_constants, self._reference_out_of_plane),
        ):
            atoms = getattr(self, kind)
            if len(atoms):
                _, fade, d_twist, _ = faded_torsions(
                    x, torch.as_tensor(atoms), torch.as_tensor(reference)
                )
                weights = constants * fade[0].numpy()  # (t,)
                hessian += _gram(atoms, weights, d_twist[0].numpy(), n)
        return hessian

    def energy_and_forces(self, positions):
        """Model energy (eV) and forces (n, 3) (eV/Å) at positions (n, 3)."""
        energies, gradients = self.energies_and_gradients(np.asarray(positions)[None])
        return float(energies[0]), -gradients[0]

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        energy, forces = self.energy_and_forces(self.atoms.get_positions())
        self.results = {"energy": energy, "forces": forces}


def _checked_reference(reference, numbers):
    """``reference`` as float64 positions (n, 3) and ``numbers`` (n,) as an array, refused
    unless of these shapes and finite."""
    reference = np.array(reference, dtype=np.float64)  # (n, 3)
    numbers = np.asarray(numbers)
    if reference.ndim != 2 or reference.shape[1] != 3 or len(numbers) != len(reference):
        raise ValueError(
            f"reference must be (n, 3) positions of the {len(numbers)} "
            f"atoms, got shape {reference.shape}"
        )
    if not np.isfinite(reference).all():
        raise ValueError("reference positions must be finite")
    return reference, numbers


def _gram(atoms, weights, derivatives, n_atoms):
    """``B^T diag(w) B`` (3n, 3n) of primitives on ``atoms`` (t, k) with ``weights`` (t,)
    and derivatives (t, k, 3) with respect to those atoms."""
    t, k = np.shape(atoms)
    rows = np.zeros((t, 3 * n_atoms))  # (t, 3n): the Wilson B matrix of these primitives
    for slot in range(k):  # the atoms of one primitive are distinct
        columns = 3 * np.asarray(atoms)[:, slot, None] + np.arange(3)  # (t, 3)
        rows[np.arange(t)[:, None], columns] += derivatives[:, slot]
    return (rows.T * weights) @ rows
