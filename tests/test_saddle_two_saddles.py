"""Two saddle points near one guess, on a closed-form surface: a soft torsion's and a
stiff bond's.

Five carbons: a chain 0-1-2-3 whose torsion has a soft barrier (a maximum at
``TWIST``), and a bond 3-4 being made or broken, a double well in its length whose
maximum lies at ``PARTIAL`` Å, between bonded and apart. Every internal coordinate has
a term of its own, so the two saddle points are known in closed form: the reaction's
(bond 3-4 at its maximum, the torsion at a minimum, ``BARRIER`` eV) and the torsion's
(the torsion at its maximum, the bond in a well, ``TWIST_BARRIER`` eV, lower). From a
guess near both, the target's lowest mode is the bond's (−7 eV/Å² against the
torsion's −0.2 eV/rad²), while the Lindh model's softest motion is the torsion: the
search under the Lindh prior must end at the reaction's saddle point, and its record
must say so. With the Lindh model's stretch not reversed along the partial bond
(:class:`asebo.model.priors.RecentredLindh` without ``reaction_pairs``) the search from
this guess ends at the torsion's saddle point instead, as the search under the surface
itself as a prior calculator does: its record must say that it ended on another
motion than the one it set out along. The
benchmark's column of the mode (``asebo bench ts``) is computed here where the answer is
known.
"""

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.calculators.calculator import Calculator, all_changes

from asebo.benchmarks._endpoint_audit import (
    finite_difference_hessian,
    imaginary_modes,
    lowest_mode,
    mode_overlap,
)
from asebo.benchmarks.ts import ON_MODE
from asebo.optimize.bonding import partial_bonds

pytest.importorskip("sella")

from asebo import BOSaddle  # noqa: E402

BOND, BOND_STIFFNESS = 1.5, 30.0  # Å, eV/Å²: the chain's bonds
ANGLE, ANGLE_STIFFNESS = np.radians(110.0), 5.0  # rad, eV/rad²: the three bends
TWIST, TWIST_BARRIER = np.radians(120.0), 0.1  # rad, eV: the soft torsion 0-1-2-3
OTHER_TWIST, OTHER_STIFFNESS = np.radians(180.0), 2.0  # rad, eV/rad²: torsion 1-2-3-4
PARTIAL, WELL, BARRIER = 2.0, 0.4, 0.5  # Å, Å, eV: the double well of bond 3-4


def _length(x, i, j):
    return torch.linalg.norm(x[i] - x[j])


def _angle(x, i, j, k):
    u, v = x[i] - x[j], x[k] - x[j]
    return torch.arccos(torch.dot(u, v) / (torch.linalg.norm(u) * torch.linalg.norm(v)))


def _dihedral(x, i, j, k, m):
    b0, b1, b2 = x[j] - x[i], x[k] - x[j], x[m] - x[k]
    n0, n1 = torch.linalg.cross(b0, b1), torch.linalg.cross(b1, b2)
    across = torch.dot(torch.linalg.cross(n0, n1), b1 / torch.linalg.norm(b1))
    return torch.atan2(across, torch.dot(n0, n1))


def energy(x):
    """The surface's energy (eV) at positions ``x`` (5, 3), a tensor."""
    value = sum(0.5 * BOND_STIFFNESS * (_length(x, i, i + 1) - BOND) ** 2 for i in range(3))
    for i in range(3):
        value = value + 0.5 * ANGLE_STIFFNESS * (_angle(x, i, i + 1, i + 2) - ANGLE) ** 2
    twist = _dihedral(x, 0, 1, 2, 3)
    value = value + 0.5 * TWIST_BARRIER * (1 + torch.cos(2 * (twist - TWIST)))
    other = _dihedral(x, 1, 2, 3, 4)
    value = value + OTHER_STIFFNESS * (1 - torch.cos(other - OTHER_TWIST))
    stretch = (_length(x, 3, 4) - PARTIAL) ** 2
    return value + BARRIER * (stretch - WELL**2) ** 2 / WELL**4


class TwoSaddles(Calculator):
    """:func:`energy` and its forces by automatic differentiation."""

    implemented_properties = ("energy", "free_energy", "forces")

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        x = torch.tensor(self.atoms.positions, dtype=torch.float64, requires_grad=True)
        value = energy(x)
        (gradient,) = torch.autograd.grad(value, x)
        result = float(value.detach())
        self.results = {"energy": result, "free_energy": result, "forces": -gradient.numpy()}


def _placed(a, b, c, length, angle, dihedral):
    """The atom ``length`` from ``c``, at ``angle`` to ``b-c`` and ``dihedral`` about
    ``b-c`` from ``a`` (natural extension reference frame)."""
    bc = (c - b) / np.linalg.norm(c - b)
    normal = np.cross(b - a, bc)
    normal /= np.linalg.norm(normal)
    local = np.array(
        [
            -length * np.cos(angle),
            length * np.sin(angle) * np.cos(dihedral),
            length * np.sin(angle) * np.sin(dihedral),
        ]
    )
    frame = np.column_stack([bc, np.cross(normal, bc), normal])
    return c + frame @ local


def chain(stretch, twist):
    """The five carbons with bond 3-4 ``stretch`` Å long and torsion 0-1-2-3 ``twist``
    rad, every other coordinate at its rest value."""
    x = [np.zeros(3), np.array([BOND, 0.0, 0.0])]
    x.append(x[1] + BOND * np.array([-np.cos(ANGLE), np.sin(ANGLE), 0.0]))
    x.append(_placed(x[0], x[1], x[2], BOND, ANGLE, twist))
    x.append(_placed(x[1], x[2], x[3], stretch, ANGLE, OTHER_TWIST))
    atoms = Atoms("C5", positions=x)
    atoms.calc = TwoSaddles()
    return atoms


GUESS = (PARTIAL + 0.15, TWIST + np.radians(5.0))
REACTION = (PARTIAL, TWIST + np.pi / 2)  # the bond at its maximum, the torsion in a well
TORSION = (PARTIAL + WELL, TWIST)  # the torsion at its maximum, the bond in a well


def test_the_surface_forces_are_its_energy_gradient_and_the_saddle_points_are_first_order():
    atoms = chain(*GUESS)
    positions = atoms.positions.copy()
    numeric = np.zeros_like(positions)
    for index in range(positions.size):
        for sign in (1.0, -1.0):
            moved = positions.copy()
            moved.flat[index] += sign * 1e-5
            atoms.positions = moved
            numeric.flat[index] -= sign * atoms.get_potential_energy() / 2e-5
    atoms.positions = positions
    assert atoms.get_forces() == pytest.approx(numeric, abs=1e-6)
    for point, height in ((REACTION, BARRIER), (TORSION, TWIST_BARRIER)):
        saddle = chain(*point)
        assert saddle.get_potential_energy() == pytest.approx(height, abs=1e-9)
        assert np.abs(saddle.get_forces()).max() < 1e-6
        assert len(imaginary_modes(saddle, TwoSaddles())) == 1


def test_the_guess_makes_one_partial_bond_and_its_lowest_mode_is_the_reactions():
    guess = chain(*GUESS)
    assert partial_bonds(guess.numbers, guess.positions) == ((3, 4),)
    start_mode = lowest_mode(finite_difference_hessian(guess, TwoSaddles()), guess)
    on_mode = {}
    for name, point in (("reaction", REACTION), ("torsion", TORSION)):
        saddle = chain(*point)
        mode = lowest_mode(finite_difference_hessian(saddle, TwoSaddles()), saddle)
        on_mode[name] = mode_overlap(guess, start_mode, saddle, mode)
    assert on_mode["reaction"] > 0.9  # the benchmark counts it on the guess's mode
    assert on_mode["torsion"] < ON_MODE  # a first-order saddle point of another motion: a miss


def test_the_lindh_prior_search_ends_at_the_reactions_saddle_point_and_says_so():
    guess = chain(*GUESS)
    start = guess.copy()
    start_mode = lowest_mode(finite_difference_hessian(start, TwoSaddles()), start)
    search = BOSaddle(guess, prior="lindh", logfile=None)
    assert search.run(fmax=0.01, steps=60)
    assert guess.get_distance(3, 4) == pytest.approx(PARTIAL, abs=0.01)
    assert guess.get_potential_energy() == pytest.approx(BARRIER, abs=1e-3)
    result = search.result
    assert result.order == 1
    assert result.overlap > 0.9  # the model's imaginary mode is the one climbed from the start
    end_mode = lowest_mode(finite_difference_hessian(guess, TwoSaddles()), guess)
    assert mode_overlap(start, start_mode, guess, end_mode) > 0.9


def test_under_a_prior_calculator_the_record_says_the_saddle_point_is_another_motions():
    # the surface itself as the prior: the first walk's model, fitted to the start
    # alone, is the surface there, and its lowest mode the bond's; the walk on it ends
    # at the torsion's saddle point, and the record, whose start mode is found where
    # the search ends from a GP fitted again to what the first walk's model knew, says
    # so as the finite-difference Hessians do
    guess = chain(*GUESS)
    start = guess.copy()
    start_mode = lowest_mode(finite_difference_hessian(start, TwoSaddles()), start)
    search = BOSaddle(guess, prior=TwoSaddles(), logfile=None)
    assert search.run(fmax=0.01, steps=60)
    assert guess.get_potential_energy() == pytest.approx(TWIST_BARRIER, abs=1e-3)
    state = search.observations.state
    assert state["start_seen"] == 1
    recorded = np.asarray(state["start_mode"])
    assert abs(np.vdot(recorded, start_mode)) == pytest.approx(1.0, abs=1e-3)
    end_mode = lowest_mode(finite_difference_hessian(guess, TwoSaddles()), guess)
    result = search.result
    assert result.order == 1
    by_differences = mode_overlap(start, start_mode, guess, end_mode)
    assert result.overlap == pytest.approx(by_differences, abs=0.01)
    assert result.overlap < ON_MODE


class FailingNearTheStart(TwoSaddles):
    """:class:`TwoSaddles` whose calls raise where one coordinate of ``start`` alone is
    moved, as an SCF that does not converge: where the model's Hessian at the start asks
    a prior calculator (central differences, coordinate by coordinate), which the walk
    never does."""

    def __init__(self, start):
        super().__init__()
        self.start = np.array(start)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        if np.count_nonzero(atoms.positions != self.start) == 1:
            raise RuntimeError("SCF not converged")
        super().calculate(atoms, properties, system_changes)


def test_a_prior_that_fails_where_the_start_mode_is_found_leaves_the_result_standing():
    guess = chain(*GUESS)
    search = BOSaddle(guess, prior=FailingNearTheStart(guess.positions), logfile=None)
    assert search.run(fmax=0.01, steps=60)
    result = search.result
    assert result.converged and result.order == 1
    assert result.overlap is None
    assert "start_seen" not in search.observations.state
