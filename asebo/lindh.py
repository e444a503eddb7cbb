r"""A harmonic model of a molecule with the force constants of Lindh's model Hessian.

Lindh, Bernhardsson, Karlström and Malmqvist (Chem. Phys. Lett. 241, 423 (1995))
give every pair of atoms a weight that decays with their distance,

.. math:: \rho_{ij} = \exp\big(\alpha_{ij} (r_{\mathrm{ref},ij}^2 - r_{ij}^2)\big),

with ``alpha`` and ``r_ref`` set by the periodic-table rows of the two atoms, and
force constants ``k_r rho_ij`` for the stretch of ``ij`` and ``k_phi rho_ij rho_jk``
for the bend of ``i-j-k``. :class:`LindhModel` is the harmonic energy with these
force constants around a reference geometry ``x0``:

.. math:: E(x) = \tfrac12 k_r \sum_{ij} \rho_{ij} (r_{ij} - r^0_{ij})^2
              + \tfrac12 k_\phi \sum_{ijk} \rho_{ij} \rho_{jk} (\theta_{ijk} - \theta^0_{ijk})^2,

the weights taken at ``x0``. Its Hessian at ``x0`` is Lindh's model Hessian (without
torsions); its minimum is ``x0``. As the GP's prior mean it tells the GP that bonds
are stiff and bends soft before any force has been computed: the GP then learns
the difference, which near the reference is close to linear in the bond lengths.
It is an ASE calculator, so :class:`asebo.gp.CalculatorPrior` takes it unchanged.
"""

import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.units import Bohr, Hartree

# Lindh et al. (1995), Table 1: alpha (bohr^-2) and r_ref (bohr) by the rows of two atoms
_ALPHA = {(1, 1): 1.0000, (1, 2): 0.3949, (1, 3): 0.3949,
          (2, 2): 0.2800, (2, 3): 0.2800, (3, 3): 0.2800}
_R_REF = {(1, 1): 1.35, (1, 2): 2.10, (1, 3): 2.53,
          (2, 2): 2.87, (2, 3): 3.40, (3, 3): 3.40}
STRETCH_CONSTANT = 0.45 * Hartree / Bohr ** 2  # k_r, eV/Å²
BEND_CONSTANT = 0.15 * Hartree  # k_phi, eV/rad²


def _row(number):
    """Periodic-table row, rows beyond the third counted as the third (Lindh et al.)."""
    return 1 if number <= 2 else 2 if number <= 10 else 3


def lindh_weights(positions, numbers):
    """Pair weights ``rho_ij`` (n, n) of Lindh et al. (1995), zero on the diagonal."""
    rows = np.array([_row(z) for z in numbers])
    low, high = np.minimum.outer(rows, rows), np.maximum.outer(rows, rows)
    alpha = np.vectorize(lambda a, b: _ALPHA[a, b])(low, high)  # (n, n), bohr^-2
    r_ref = np.vectorize(lambda a, b: _R_REF[a, b])(low, high)  # (n, n), bohr
    distance = np.linalg.norm(positions[:, None] - positions[None], axis=-1) / Bohr
    weights = np.exp(alpha * (r_ref ** 2 - distance ** 2))
    np.fill_diagonal(weights, 0.0)
    return weights


def _bend_angles(positions, bends):
    """Angles (b,) at the middle atom of each ``(i, j, k)`` row of ``bends``, with
    their gradients with respect to ``x_i`` and ``x_k`` (b, 3) each (Wilson's B matrix)."""
    u = positions[bends[:, 0]] - positions[bends[:, 1]]  # (b, 3)
    v = positions[bends[:, 2]] - positions[bends[:, 1]]  # (b, 3)
    lu, lv = np.linalg.norm(u, axis=1), np.linalg.norm(v, axis=1)
    eu, ev = u / lu[:, None], v / lv[:, None]
    cos = np.clip(np.einsum("bi,bi->b", eu, ev), -1.0, 1.0)
    sin = np.linalg.norm(np.cross(eu, ev), axis=1)
    angle = np.arctan2(sin, cos)
    # at a straight angle the direction of bending is undefined: no force from it
    scale = np.where(sin > 1e-8, 1.0 / np.maximum(sin, 1e-8), 0.0)[:, None]
    d_i = scale * (cos[:, None] * eu - ev) / lu[:, None]
    d_k = scale * (cos[:, None] * ev - eu) / lv[:, None]
    return angle, d_i, d_k


class LindhModel(Calculator):
    """Harmonic stretches and bends with Lindh's model force constants around ``x0``.

    Parameters
    ----------
    reference : array (n, 3)
        Positions ``x0`` of the minimum, Å; the weights and the reference bond
        lengths and angles are taken there.
    numbers : array (n,)
        Atomic numbers.
    cutoff : float
        Stretches and bends whose weight (``rho_ij`` or ``rho_ij rho_jk``) is below
        ``cutoff`` are left out.

    Attributes
    ----------
    stretches : array (p, 2), stretch_constants : array (p,)
        Atom pairs and force constants ``k_r rho_ij``, eV/Å².
    bends : array (b, 3), bend_constants : array (b,)
        Triples ``(i, j, k)`` with ``j`` in the middle and force constants
        ``k_phi rho_ij rho_jk``, eV/rad².
    """

    implemented_properties = ["energy", "forces"]

    def __init__(self, reference, numbers, cutoff=1e-2):
        super().__init__()
        reference = np.array(reference, dtype=np.float64)  # (n, 3)
        numbers = np.asarray(numbers)
        if reference.ndim != 2 or reference.shape[1] != 3 or len(numbers) != len(reference):
            raise ValueError(f"reference must be (n, 3) positions of the {len(numbers)} "
                             f"atoms, got shape {reference.shape}")
        if not np.isfinite(reference).all():
            raise ValueError("reference positions must be finite")
        rho = lindh_weights(reference, numbers)  # (n, n)
        i, j = np.nonzero(np.triu(rho > cutoff, k=1))
        self.stretches = np.stack([i, j], axis=1)  # (p, 2)
        self.stretch_constants = STRETCH_CONSTANT * rho[i, j]  # (p,)
        triples = rho[:, :, None] * rho[None, :, :]  # (n, n, n): rho_ij rho_jk
        i, j, k = np.nonzero(triples > cutoff)
        keep = i < k  # each bend once; i != j and j != k since rho_jj = 0
        self.bends = np.stack([i[keep], j[keep], k[keep]], axis=1)  # (b, 3)
        self.bend_constants = BEND_CONSTANT * triples[i[keep], j[keep], k[keep]]  # (b,)
        self.reference = reference
        self._reference_lengths = self._lengths(reference)[0]
        self._reference_angles = _bend_angles(reference, self.bends)[0]

    def _lengths(self, positions):
        """Bond lengths (p,) and their unit vectors (p, 3) from atom j to atom i."""
        d = positions[self.stretches[:, 0]] - positions[self.stretches[:, 1]]
        length = np.linalg.norm(d, axis=1)
        return length, d / length[:, None]

    def energy_and_forces(self, positions):
        """Model energy (eV) and forces (n, 3) (eV/Å) at positions (n, 3)."""
        positions = np.asarray(positions, dtype=np.float64)
        forces = np.zeros_like(positions)
        length, unit = self._lengths(positions)
        stretch = length - self._reference_lengths  # (p,)
        energy = 0.5 * np.sum(self.stretch_constants * stretch ** 2)
        pull = (self.stretch_constants * stretch)[:, None] * unit  # dE/dx_i, (p, 3)
        np.add.at(forces, self.stretches[:, 0], -pull)
        np.add.at(forces, self.stretches[:, 1], pull)
        if len(self.bends):
            angle, d_i, d_k = _bend_angles(positions, self.bends)
            bend = angle - self._reference_angles  # (b,)
            energy += 0.5 * np.sum(self.bend_constants * bend ** 2)
            torque = (self.bend_constants * bend)[:, None]  # (b, 1)
            np.add.at(forces, self.bends[:, 0], -torque * d_i)
            np.add.at(forces, self.bends[:, 2], -torque * d_k)
            np.add.at(forces, self.bends[:, 1], torque * (d_i + d_k))
        return float(energy), forces

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        energy, forces = self.energy_and_forces(self.atoms.get_positions())
        self.results = {"energy": energy, "forces": forces}
