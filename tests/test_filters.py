"""BOOptimizer on periodic cells and under ASE's cell filters: the lattice constant EMT
gives, resumed runs, the defaults and the refusals."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, fcc111
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.constraints import FixAtoms, FixCartesian
from ase.filters import ExpCellFilter, FrechetCellFilter, StrainFilter, UnitCellFilter
from ase.io import read
from ase.optimize import BFGS
from killed_calls import PREAMBLE

from asebo import BOOptimizer
from asebo.model.periodic import PeriodicMetric, RecentredSprings
from asebo.model.priors import CalculatorPrior, HighestEnergyPrior
from asebo.optimize.observations import Observations, RestartError
from asebo.optimize.representations import CartesianPositions, PeriodicPositions
from calculators import CountingCalculator


def copper(a=3.75):
    atoms = bulk("Cu", a=a)  # one atom
    atoms.calc = CountingCalculator(EMT())
    return atoms


def emt_lattice_constant():
    """fcc Cu's lattice constant under EMT, Å, from BFGS on the cell at fmax 1e-5."""
    atoms = bulk("Cu", a=3.75)
    atoms.calc = EMT()
    BFGS(FrechetCellFilter(atoms), logfile=None).run(fmax=1e-5, steps=200)
    return atoms.cell.cellpar()[0] * np.sqrt(2)


def cubic_cell(seed=0):
    """Four Cu atoms, rattled in a strained cubic cell."""
    atoms = bulk("Cu", cubic=True, a=3.6)
    atoms.rattle(0.05, seed=seed)
    atoms.set_cell(atoms.cell @ np.diag([1.03, 0.99, 1.01]), scale_atoms=True)
    atoms.calc = CountingCalculator(EMT())
    return atoms


def copper_slab():
    atoms = fcc111("Cu", (2, 2, 3), vacuum=5.0)
    atoms.rattle(0.05, seed=1)
    atoms.set_constraint(FixAtoms(mask=atoms.positions[:, 2] < atoms.positions[:, 2].min() + 1))
    atoms.calc = CountingCalculator(EMT())
    return atoms


@pytest.mark.filterwarnings("ignore:Use FrechetCellFilter")
@pytest.mark.parametrize(
    ("cell_filter", "most_calls"),
    # ASE's deprecated ExpCellFilter moves F but returns forces in log F, so its path
    # turns on round-off: 12 to 32 calls from this start and two others 0.01 Å apart
    [(FrechetCellFilter, 10), (UnitCellFilter, 10), (ExpCellFilter, 40)],
)
def test_a_filter_relaxes_copper_to_the_emt_lattice_constant(cell_filter, most_calls):
    atoms = copper()
    opt = BOOptimizer(cell_filter(atoms), logfile=None)
    assert isinstance(opt.representation, PeriodicPositions)
    assert isinstance(opt.prior, RecentredSprings)
    assert opt.run(fmax=1e-3, steps=most_calls)
    assert atoms.cell.cellpar()[0] * np.sqrt(2) == pytest.approx(emt_lattice_constant(), abs=2e-4)
    assert atoms.calc.ncalls == opt.nsteps + 1 <= most_calls


def test_one_atom_converges_with_no_step_without_a_filter():
    periodic = copper()
    opt = BOOptimizer(periodic, logfile=None)
    assert isinstance(opt.representation, PeriodicPositions)
    assert opt.run(fmax=1e-4, steps=10) and opt.nsteps == 0
    assert periodic.calc.ncalls == 1
    alone = Atoms("Ar", positions=[[0.0, 0.0, 0.0]])
    alone.calc = CountingCalculator(LennardJones())
    opt = BOOptimizer(alone, logfile=None)
    assert opt.run(fmax=1e-4, steps=10) and opt.nsteps == 0
    assert alone.calc.ncalls == 1
    # alone in a periodic box with no neighbour within 10 Å: no springs to build
    boxed = Atoms("Cu", positions=[[1.0, 2.0, 3.0]], cell=[15.0, 15.0, 15.0], pbc=True)
    boxed.calc = CountingCalculator(EMT())
    opt = BOOptimizer(boxed, logfile=None)
    assert isinstance(opt.prior, HighestEnergyPrior)
    assert opt.run(fmax=1e-4, steps=10) and opt.nsteps == 0


def test_a_slab_keeps_its_fixed_layer_and_reaches_the_bfgs_minimum():
    atoms = copper_slab()
    reference = atoms.copy()
    reference.calc = EMT()
    BFGS(reference, logfile=None).run(fmax=0.005, steps=300)
    start = atoms.get_positions()
    fixed = atoms.constraints[0].get_indices()
    opt = BOOptimizer(atoms, logfile=None)
    assert opt.run(fmax=0.01, steps=60)
    np.testing.assert_array_equal(atoms.positions[fixed], start[fixed])
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), abs=2e-3)
    # the metric was built at the springs' centre: the prior's last recentring
    assert opt.engine.surrogate._metric[0] == opt.prior.centre
    assert isinstance(opt.engine.surrogate._metric[1], PeriodicMetric)


def test_the_trajectory_of_a_filter_run_holds_the_atoms_in_their_cell(tmp_path):
    trajectory, restart = str(tmp_path / "cell.traj"), str(tmp_path / "cell.json")
    atoms = cubic_cell()
    opt = BOOptimizer(FrechetCellFilter(atoms), trajectory=trajectory, restart=restart)
    assert opt.run(fmax=0.01, steps=40)
    frames = read(trajectory, index=":")
    assert len(frames) == atoms.calc.ncalls == len(opt.energies)
    last = frames[-1]
    np.testing.assert_allclose(last.cell, atoms.cell, atol=1e-12)
    np.testing.assert_allclose(last.positions, atoms.positions, atol=1e-12)
    probe = last.copy()
    probe.calc = EMT()
    np.testing.assert_allclose(last.get_forces(), probe.get_forces(), atol=1e-10)
    assert last.get_potential_energy() == pytest.approx(probe.get_potential_energy(), abs=1e-12)
    for frame in frames:  # each frame carries the stress computed there
        probe = frame.copy()
        probe.calc = EMT()
        np.testing.assert_allclose(frame.get_stress(), probe.get_stress(), atol=1e-12)
    # the restart file holds the filter's generalized positions: four atoms and the cell
    record = Observations.load(opt.numbers, restart)
    assert np.array(record.positions).shape == (len(frames), 7, 3)


def test_a_filter_built_again_on_the_last_frame_resumes_in_the_runs_coordinates(tmp_path):
    """The filter of a resumed run starts from the last frame's cell; it is given the
    undeformed cell of the run it resumes, so that the observations stay where they
    were (ASE's own restart test builds its filter in this way)."""
    trajectory, restart = str(tmp_path / "cell.traj"), str(tmp_path / "cell.json")
    atoms = cubic_cell()
    first = BOOptimizer(FrechetCellFilter(atoms), trajectory=trajectory, restart=restart)
    first.run(fmax=0.01, steps=3)
    original_cell = np.array(first.atoms.orig_cell)
    last = read(trajectory)
    last.calc = CountingCalculator(EMT())
    system = FrechetCellFilter(last)
    assert not np.allclose(system.orig_cell, original_cell)
    resumed = BOOptimizer(system, restart=restart, logfile=None)
    np.testing.assert_array_equal(system.orig_cell, original_cell)
    np.testing.assert_allclose(system.get_positions(), first.atoms.get_positions(), atol=1e-12)
    assert resumed.run(fmax=0.01, steps=40)
    assert last.calc.ncalls + 4 == len(resumed.observations)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda atoms: UnitCellFilter(atoms),
            "FrechetCellFilter whose filter, exp_cell_factor differ",
        ),
        (lambda atoms: FrechetCellFilter(atoms, scalar_pressure=0.01), "pressure differ"),
    ],
)
def test_a_restart_file_of_another_filter_is_refused(tmp_path, make, match):
    restart = str(tmp_path / "cell.json")
    BOOptimizer(FrechetCellFilter(cubic_cell()), restart=restart, logfile=None).run(steps=1)
    atoms = cubic_cell()
    with pytest.raises(RestartError, match=match):
        BOOptimizer(make(atoms), restart=restart, logfile=None)
    with pytest.raises(RestartError, match="given without a filter"):
        BOOptimizer(cubic_cell(), restart=restart, logfile=None)
    assert atoms.calc.ncalls == 0


KILLED_FILTER_RUN = PREAMBLE + textwrap.dedent("""
    import numpy as np
    from ase.build import bulk
    from ase.calculators.emt import EMT
    from ase.filters import FrechetCellFilter
    from killed_calls import killed_at_call
    from asebo import BOOptimizer

    atoms = bulk("Cu", cubic=True, a=3.6)
    atoms.rattle(0.05, seed=0)
    atoms.set_cell(atoms.cell @ np.diag([1.03, 0.99, 1.01]), scale_atoms=True)
    atoms.calc = killed_at_call(EMT, sys.argv[2], int(sys.argv[3]), line=lambda a: "call")()
    BOOptimizer(FrechetCellFilter(atoms), restart=sys.argv[1], logfile=None).run(
        fmax=0.01, steps=int(sys.argv[4]))
""")


def test_a_filter_run_resumed_after_kill_9_follows_the_uninterrupted_path(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(KILLED_FILTER_RUN)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # the same arithmetic in every run

    def run(name, kill_at, steps):
        restart, calls = str(tmp_path / f"{name}.json"), str(tmp_path / f"{name}.txt")
        command = [sys.executable, str(script), restart, calls, str(kill_at), str(steps)]
        done = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
        return done, restart, calls

    whole, uninterrupted, _ = run("whole", 0, 8)
    assert whole.returncode == 0, whole.stderr
    killed, restart, calls = run("killed", 4, 20)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed, _, _ = run("killed", 0, 5)
    assert resumed.returncode == 0, resumed.stderr
    numbers = np.array([29] * 4 + [0] * 3)  # a filter's cell rows count as number 0
    path = Observations.load(numbers, uninterrupted)
    record = Observations.load(numbers, restart)
    # 3 calls before the kill, then the pending proposal and on to convergence, no call
    # twice
    with open(calls) as fd:
        assert fd.read().count("\n") == len(record) == len(path) > 4
    np.testing.assert_array_equal(np.array(record.positions), np.array(path.positions))
    assert record.energies == path.energies


# ---- defaults and refusals ---------------------------------------------------------------


def test_periodic_defaults_and_the_names_that_change_them():
    atoms = cubic_cell()
    opt = BOOptimizer(atoms, logfile=None)
    assert isinstance(opt.representation, PeriodicPositions)
    assert opt.settings.model.trend == PeriodicPositions.default_trend
    assert isinstance(opt.prior, RecentredSprings)
    assert isinstance(
        BOOptimizer(atoms, logfile=None, kernel="cartesian").representation, CartesianPositions
    )
    assert isinstance(BOOptimizer(atoms, logfile=None, prior="max").prior, HighestEnergyPrior)
    # 'auto': the springs for an EMT target, EMT for another calculator of EMT metals
    assert isinstance(BOOptimizer(atoms, logfile=None, prior="auto").prior, RecentredSprings)
    other = cubic_cell()
    other.calc = LennardJones(sigma=2.3, epsilon=0.4, rc=5.0)
    auto = BOOptimizer(FrechetCellFilter(other), logfile=None, prior="auto").prior
    assert isinstance(auto, CalculatorPrior) and auto.label == "EMT"
    with pytest.raises(ValueError, match="does not describe a periodic cell"):
        BOOptimizer(atoms, logfile=None, prior="lindh")
    assert atoms.calc.ncalls == 0


def test_the_log_says_which_kernel_and_prior(tmp_path):
    log = tmp_path / "bo.log"
    BOOptimizer(FrechetCellFilter(cubic_cell()), logfile=str(log))
    assert "FrechetCellFilter (positions and cell): kernel 'periodic', prior springs" in (
        log.read_text()
    )


def too_close():
    atoms = bulk("Cu", a=3.6) * (2, 1, 1)
    atoms.positions[1] = atoms.positions[0] + atoms.cell[0] * 2 - [0.3, 0.0, 0.0]
    atoms.wrap()
    atoms.calc = CountingCalculator(EMT())
    return atoms


def flat_cell():
    atoms = Atoms("Cu2", positions=[[0, 0, 0], [1.8, 0, 0]], cell=[3.6, 3.6, 0.0], pbc=True)
    atoms.calc = CountingCalculator(EMT())
    return atoms


def fixed_axis():
    atoms = cubic_cell()
    atoms.set_constraint(FixCartesian([0], mask=(False, False, True)))
    return FrechetCellFilter(atoms)


@pytest.mark.parametrize(
    ("system", "error", "match"),
    [
        (lambda: StrainFilter(cubic_cell()), TypeError, "got StrainFilter: use one of these"),
        (fixed_axis, TypeError, "FixCartesian with a cell filter"),
        (
            lambda: UnitCellFilter(cubic_cell(), constant_volume=True),
            ValueError,
            "constant_volume exactly only through FrechetCellFilter",
        ),
        (flat_cell, ValueError, "zero volume"),
        (too_close, ValueError, "0.300 Å apart .* closer than 0.5 Å"),
        (lambda: FrechetCellFilter(cubic_cell()), ValueError, "kernel='periodic'"),
    ],
)
def test_what_cannot_be_relaxed_is_refused_before_any_call(system, error, match):
    system = system()
    kernel = "anisotropic" if match == "kernel='periodic'" else None
    with pytest.raises(error, match=match):
        BOOptimizer(system, logfile=None, kernel=kernel)
    atoms = getattr(system, "atoms", system)
    assert atoms.calc.ncalls == 0


def test_the_periodic_kernel_refuses_fixed_axes():
    atoms = cubic_cell()
    atoms.set_constraint(FixCartesian([0], mask=(False, False, True)))
    assert isinstance(BOOptimizer(atoms, logfile=None).representation, CartesianPositions)
    with pytest.raises(ValueError, match="FixCartesian .* kernel='cartesian'"):
        BOOptimizer(atoms, logfile=None, kernel="periodic")


class Smeared(Calculator):
    """EMT whose ``free_energy`` is EMT's energy and whose ``energy`` is not: the forces
    are the gradient of the free energy, as with a smeared DFT calculator."""

    implemented_properties = ("energy", "free_energy", "forces", "stress")

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        probe = self.atoms.copy()
        probe.calc = EMT()
        free = probe.get_potential_energy()
        self.results = {
            "free_energy": free,
            "energy": free + 0.5 * np.sin(self.atoms.positions[0, 0]),
            "forces": probe.get_forces(),
            "stress": probe.get_stress(),
        }


def test_the_force_consistent_energy_is_observed():
    atoms = cubic_cell()
    atoms.calc = Smeared()
    opt = BOOptimizer(FrechetCellFilter(atoms), logfile=None)
    assert opt.run(fmax=0.01, steps=30)
    probe = atoms.copy()
    probe.calc = EMT()
    assert opt.energies[-1] == pytest.approx(probe.get_potential_energy(), abs=1e-12)
    assert probe.get_potential_energy() != pytest.approx(atoms.get_potential_energy(), abs=1e-3)
