"""The check that a calculator's energies agree with its forces."""

import numpy as np
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT

from asebo import BOOptimizer
from asebo.optimize.consistency import MismatchNote, energy_force_mismatch
from asebo.optimize.observations import Observations


def quadratic(x, hessian):
    """Energy and forces of 0.5 x.H.x at configurations x (m, N, 3)."""
    flat = x.reshape(len(x), -1)
    return 0.5 * np.einsum("mi,ij,mj->m", flat, hessian, flat), -(flat @ hessian).reshape(x.shape)


def test_a_quadratic_surface_agrees_for_any_step():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(12, 12))
    hessian = a @ a.T
    x = rng.normal(scale=0.5, size=(4, 4, 3))  # steps of an Å and more
    energies, forces = quadratic(x, hessian)
    assert energy_force_mismatch(x, energies, forces) is None


def test_an_energy_that_jumps_is_reported_with_the_numbers():
    rng = np.random.default_rng(1)
    hessian = np.eye(6) * 5.0
    x = rng.normal(scale=0.05, size=(3, 2, 3))
    energies, forces = quadratic(x, hessian)
    energies[-1] += 0.2  # the energy jumps; the forces do not say so
    start = int(np.argmin(energies[:-1]))
    note = energy_force_mismatch(x, energies, forces)
    expected_work = -0.5 * np.sum((forces[start] + forces[-1]) * (x[-1] - x[start]))
    assert note is not None
    assert f"configuration {start} to 2" in note
    assert f"gives {expected_work:+.3f} eV" in note
    energies[-1] -= 0.2 - 0.01  # 0.01 eV: below what is reported
    assert energy_force_mismatch(x, energies, forces) is None


class ShiftedEMT(Calculator):
    """EMT with an energy that steps by 0.3 eV between calls, forces unchanged."""

    implemented_properties = ("energy", "forces")

    def __init__(self):
        super().__init__()
        self.emt, self.calls = EMT(), 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        work = self.atoms.copy()
        work.calc = self.emt
        self.results = {
            "energy": work.get_potential_energy() + 0.3 * (self.calls % 2),
            "forces": work.get_forces(),
        }
        self.calls += 1


def run_log(calc, tmp_path):
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.05, seed=2)
    atoms.calc = calc
    log = tmp_path / "bo.log"
    BOOptimizer(atoms, logfile=str(log)).run(fmax=0.05, steps=8)
    return log.read_text()


def test_the_log_says_once_when_the_calculator_disagrees_with_itself(tmp_path):
    assert "disagree" not in run_log(EMT(), tmp_path)
    text = run_log(ShiftedEMT(), tmp_path)
    assert text.count("the calculator's energies and forces disagree") == 1


def test_a_long_step_on_a_cubic_surface_is_not_reported():
    """E = -a s + c s^3 along a step past the line's minimum: the trapezoid rule misses
    by as much as the energy changes, a sixth of the forces' change along the step,
    which is no disagreement of the calculator."""
    a, c, length = 1.0, 0.5, 1.2
    s = np.array([0.0, length])
    direction = np.array([[1.0, 0.0, 0.0]])  # (1, 3)
    x = s[:, None, None] * direction  # (2, 1, 3)
    energies = -a * s + c * s**3
    forces = -(-a + 3 * c * s**2)[:, None, None] * direction
    work = -0.5 * np.sum((forces[0] + forces[1]) * (x[1] - x[0]))
    mismatch = abs(energies[1] - energies[0] - work)
    assert mismatch > 0.3 * (abs(energies[1] - energies[0]) + abs(work))  # large
    assert energy_force_mismatch(x, energies, forces) is None


def line_record(positions, energy, force, offsets):
    """A record of configurations at ``positions`` (m,) along one line, with
    ``energy(s) + offsets`` and ``force(s)``: offsets of zero are a calculator that
    agrees with itself."""
    record = Observations(numbers=[1])
    for s, offset in zip(positions, offsets):
        record.append(np.array([[s, 0.0, 0.0]]), energy(s) + offset, np.array([[force(s), 0, 0]]))
    return record


def notes_of(record):
    """The notes of :class:`MismatchNote` after each of ``record``'s steps."""
    note, said = MismatchNote(), []
    for count in range(1, len(record) + 1):
        steps = Observations(numbers=[1])
        for index in range(count):
            steps.append(record.positions[index], record.energies[index], record.forces[index])
        said.extend(note.notes(steps))
    return said


def test_one_long_step_across_a_barrier_is_no_disagreement():
    """E(s) = cos(2 pi s / 0.4) eV and a step of 0.36 Å, nearly a whole period (a step
    across a torsion's barrier): the forces rise and fall within the step."""
    wave = 2 * np.pi / 0.4
    record = line_record(
        [0.0, 0.36], lambda s: np.cos(wave * s), lambda s: wave * np.sin(wave * s), [0, 0]
    )
    step = record.positions[1] - record.positions[0]
    work = -0.5 * np.sum((record.forces[0] + record.forces[1]) * step)
    assert abs(record.energies[1] - record.energies[0] - work) > 0.3  # the trapezoid misses
    assert energy_force_mismatch(record.positions, record.energies, record.forces)
    assert notes_of(record) == []


def test_a_calculator_that_disagrees_on_every_step_is_reported_once():
    """E(s) = s^2 walked downhill in steps of 0.1 Å, each energy 0.3 eV above the last
    one's: every step disagrees with its forces."""
    record = line_record(
        [1.0, 0.9, 0.8, 0.7, 0.6], lambda s: s**2, lambda s: -2 * s, 0.3 * np.arange(5)
    )
    said = notes_of(record)
    assert len(said) == 1
    assert "the calculator's energies and forces disagree" in said[0]
