"""BOOptimizer behaves like an ASE optimizer and finds the minimum BFGS finds."""

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, fcc111, molecule
from ase.calculators.calculator import CalculationFailed, Calculator, all_changes
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter
from ase.io import read
from ase.optimize import BFGS
from killed_calls import PREAMBLE

from asebo import BOOptimizer
from asebo.model.metric import HessianMetric
from asebo.model.priors import Prior
from asebo.optimize.observations import RestartError
from asebo.optimize.representations import (
    CartesianPositions,
    InternalCoordinates,
    PeriodicPositions,
)
from asebo.optimize.settings import SearchSettings, TrustSettings
from calculators import CountingCalculator, get_calculator


def lj_cluster(seed=0):
    """Argon in reduced units (1.1 Å apart): no covalent bonds for the Lindh model,
    so the tests on it give BOOptimizer the constant prior ``'max'``."""
    rng = np.random.default_rng(seed)
    positions = np.array(
        [[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9], [1.6, 0.9, 0.6]], dtype=float
    )
    atoms = Atoms("Ar5", positions=positions + 0.05 * rng.normal(size=(5, 3)))
    atoms.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=4.0)
    return atoms


def perturbed_water(seed=0):
    atoms = molecule("H2O")
    atoms.positions += 0.1 * np.random.default_rng(seed).normal(size=(3, 3))
    return atoms


def bfgs_minimum(atoms, calc):
    reference = atoms.copy()
    reference.calc = calc
    BFGS(reference, logfile=None).run(fmax=0.01, steps=500)
    return reference.get_potential_energy()


def test_converges_on_a_lennard_jones_cluster_to_the_bfgs_minimum():
    atoms = lj_cluster()
    expected = bfgs_minimum(atoms, LennardJones(sigma=1.0, epsilon=1.0, rc=4.0))
    assert BOOptimizer(atoms, logfile=None, prior="max").run(fmax=0.01, steps=100)
    assert atoms.get_potential_energy() == pytest.approx(expected, abs=1e-3)
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() < 0.01


def test_converges_with_gfn2_xtb_on_water_to_the_bfgs_minimum():
    atoms = perturbed_water()
    expected = bfgs_minimum(atoms, get_calculator("gfn2"))
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    assert BOOptimizer(atoms, logfile=None).run(fmax=0.01, steps=60)
    assert atoms.get_potential_energy() == pytest.approx(expected, abs=1e-3)
    assert atoms.calc.ncalls < 25


def test_a_pessimistic_bound_converges_on_water_to_the_bfgs_minimum():
    atoms = perturbed_water()
    expected = bfgs_minimum(atoms, get_calculator("gfn2"))
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    assert BOOptimizer(atoms, logfile=None, kappa=-2.0).run(fmax=0.01, steps=60)
    assert atoms.get_potential_energy() == pytest.approx(expected, abs=1e-3)
    assert atoms.calc.ncalls < 25


def test_the_default_bound_is_pessimistic_from_ninety_free_coordinates():
    settings = SearchSettings()
    assert settings.kappa_for(89, prior_calculator=False) == 0.1
    assert settings.kappa_for(90, prior_calculator=False) == -3.0
    assert settings.kappa_for(900, prior_calculator=True) == 0.1
    assert SearchSettings(kappa=0.5).kappa_for(900, prior_calculator=False) == 0.5


def test_the_default_bound_counts_the_free_coordinates_the_search_moves():
    slab = fcc111("Cu", (3, 3, 4), vacuum=5.0)  # 36 atoms
    slab.calc = EMT()
    log = io.StringIO()
    assert BOOptimizer(slab, logfile=log).kappa == -3.0  # 108 free coordinates
    assert "kappa=-3: 108 free coordinates" in log.getvalue()
    slab.set_constraint(FixAtoms(indices=[atom.index for atom in slab if atom.tag == 4]))
    assert BOOptimizer(slab, logfile=None).kappa == 0.1  # 27 free atoms: 81
    assert BOOptimizer(FrechetCellFilter(slab), logfile=None).kappa == -3.0  # 81 + 9
    slab.set_constraint()
    assert BOOptimizer(slab, logfile=None, prior=LennardJones()).kappa == 0.1
    log = io.StringIO()
    assert BOOptimizer(slab, logfile=log, kappa=0.3).kappa == 0.3
    assert "kappa=" not in log.getvalue()


def test_run_twice_adds_steps_and_logs_predictions(tmp_path):
    atoms = lj_cluster(1)
    log = tmp_path / "bo.log"
    opt = BOOptimizer(atoms, logfile=str(log), trajectory=str(tmp_path / "bo.traj"), prior="max")
    opt.run(fmax=1e-4, steps=2)
    assert opt.nsteps == 2
    converged = opt.run(fmax=0.01, steps=100)
    assert converged and opt.nsteps > 2
    lines = log.read_text().splitlines()
    assert "Predicted" in lines[0]
    steps = [line for line in lines[1:] if line.split()[1].isdigit()]  # notes besides
    assert len(steps) == opt.nsteps + 1  # step 0, and a line per step
    # the prediction and the reason of the step, as recorded, with the halvings of its
    # box where the model doubted its drop
    assert all(len(line.split()) == 7 for line in steps[1:])
    assert [line.split()[-1].split("(")[0] for line in steps[1:]] == opt.reasons
    frames = read(tmp_path / "bo.traj", index=":")
    assert len(frames) == opt.nsteps + 1
    assert opt.todict()["optimizer"] == "BOOptimizer"


def gfn2_water(seed=0):
    atoms = perturbed_water(seed)
    atoms.calc = get_calculator("gfn2")
    return atoms


# GFN2-xTB starts each SCF from the previous density: a fresh calculator after the
# restart changes the forces by about 1e-7 eV/Å, and the path by as much
@pytest.mark.parametrize(
    "start, prior, atol", [(lj_cluster, "max", 1e-8), (gfn2_water, "lindh", 1e-5)]
)
def test_fragile_restart_follows_the_uninterrupted_path(tmp_path, start, prior, atol):
    uninterrupted = start(2)
    uninterrupted.calc = CountingCalculator(uninterrupted.calc)
    assert BOOptimizer(uninterrupted, logfile=None, prior=prior).run(fmax=0.01, steps=30)

    restart = tmp_path / "bo.json"
    first = start(2)
    first.calc = CountingCalculator(first.calc)
    BOOptimizer(first, restart=str(restart), logfile=None, prior=prior).run(fmax=0.01, steps=2)
    resumed = start(2)  # the original start, as a user would pass it again
    resumed.calc = CountingCalculator(resumed.calc)
    BOOptimizer(resumed, restart=str(restart), logfile=None, prior=prior).run(fmax=0.01, steps=28)
    np.testing.assert_allclose(resumed.positions, uninterrupted.positions, atol=atol)
    assert first.calc.ncalls + resumed.calc.ncalls == uninterrupted.calc.ncalls
    stored = BOOptimizer(start(2), restart=str(restart), logfile=None, prior=prior)
    assert len(stored.energies) == uninterrupted.calc.ncalls


KILLED_RUN = PREAMBLE + textwrap.dedent("""
    import numpy as np
    from ase import Atoms
    from ase.calculators.lj import LennardJones
    from killed_calls import killed_at_call
    from asebo import BOOptimizer

    rng = np.random.default_rng(0)
    positions = np.array([[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]])
    atoms = Atoms("Ar4", positions=positions + 0.05 * rng.normal(size=(4, 3)))
    atoms.calc = killed_at_call(LennardJones, sys.argv[2], int(sys.argv[3]))(
        sigma=1.0, epsilon=1.0, rc=4.0)
    print(BOOptimizer(atoms, restart=sys.argv[1], logfile=None, prior="max")
          .run(fmax=0.01, steps=40))
""")


def test_kill_9_mid_run_then_resume_repeats_no_call(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    restart, calls = tmp_path / "bo.json", tmp_path / "calls.txt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = subprocess.run(
        [sys.executable, str(script), str(restart), str(calls), "5"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert killed.returncode == -signal.SIGKILL
    assert calls.read_text().count("\n") == 4
    resumed = subprocess.run(
        [sys.executable, str(script), str(restart), str(calls), "0"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip().endswith("True")
    evaluated = calls.read_text().splitlines()
    assert len(evaluated) == len(set(evaluated)) > 5  # every configuration computed once


def test_fixed_atoms_do_not_move():
    atoms = lj_cluster(3)
    atoms.set_constraint(FixAtoms(indices=[0, 2]))
    start = atoms.get_positions()
    BOOptimizer(atoms, logfile=None, prior="max").run(fmax=0.02, steps=60)
    np.testing.assert_array_equal(atoms.positions[[0, 2]], start[[0, 2]])
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() < 0.02


def test_periodic_cells_use_the_periodic_kernel_and_keep_the_cartesian_one():
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    atoms.rattle(0.05, seed=1)
    atoms.calc = get_calculator("emt")
    opt = BOOptimizer(atoms, logfile=None)
    assert isinstance(opt.representation, PeriodicPositions)
    assert opt.run(fmax=0.05, steps=60)
    cartesian = BOOptimizer(atoms, kernel="cartesian", logfile=None)
    assert isinstance(cartesian.representation, CartesianPositions)
    with pytest.raises(ValueError, match="periodic"):
        BOOptimizer(atoms, kernel="svd", logfile=None)


class NaNAfter(Calculator):
    """Lennard-Jones energies and forces, then NaN forces from call ``bad`` on."""

    implemented_properties = ("energy", "forces")

    def __init__(self, bad):
        super().__init__()
        self.bad, self.calls = bad, 0
        self.lj = LennardJones(sigma=1.0, epsilon=1.0, rc=4.0)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.calls += 1
        work = self.atoms.copy()
        work.calc = self.lj
        forces = work.get_forces()
        if self.calls >= self.bad:
            forces = forces * np.nan
        self.results = {"energy": work.get_potential_energy(), "forces": forces}


def test_nan_forces_stop_with_a_clear_error_and_keep_the_observations(tmp_path):
    atoms = lj_cluster(4)
    atoms.calc = NaNAfter(bad=4)
    restart = tmp_path / "bo.json"
    with pytest.raises(FloatingPointError, match="NaN or inf.*3 earlier observations"):
        BOOptimizer(atoms, restart=str(restart), logfile=None).run(fmax=0.01, steps=20)
    resumed = lj_cluster(4)
    resumed.calc = NaNAfter(bad=100)  # the same calculator, to resume from the file
    kept = BOOptimizer(resumed, restart=str(restart), logfile=None)
    assert len(kept.energies) == 3 and np.isfinite(kept.forces).all()


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("trust_radius", float("nan"), "trust_radius nan, not a positive length"),
        ("trust_radius", -0.1, "trust_radius -0.1, not a positive length"),
        ("trust_radius", "wide", "trust_radius 'wide', not a positive length"),
        ("predicted_energy", "low", "predicted_energy 'low', not a finite energy"),
        ("energies", [float("inf")], "energies that are not finite"),
        ("pending", [1.0, 2.0], r"a pending of shape \(2,\), not \(\d+, 3\)"),
        ("pending", "x", "could not convert string to float"),
        ("proposals", None, "proposals that are not a list of records"),
        ("version", "1", "version '1', not 1"),
    ],
)
def test_bad_values_inside_a_restart_file_are_refused_and_the_file_kept(
    tmp_path, key, value, match
):
    restart = tmp_path / "bo.json"
    atoms = lj_cluster()
    BOOptimizer(atoms, restart=str(restart), logfile=None, prior="max").run(fmax=0.05, steps=0)
    content = json.loads(restart.read_text())
    content[key] = value
    damaged = json.dumps(content)
    restart.write_text(damaged)
    with pytest.raises(RestartError, match=f"cannot be read .*{match}.*left untouched"):
        BOOptimizer(lj_cluster(), restart=str(restart), logfile=None, prior="max")
    assert restart.read_text() == damaged


def test_a_garbage_restart_file_is_refused_first_with_ases_own_error(tmp_path):
    from ase.optimize.optimize import RestartError as ASERestartError

    garbage = tmp_path / "garbage"
    garbage.write_text("garbage")
    with pytest.raises(ASERestartError, match="cannot be read"):
        BOOptimizer(Atoms(), restart=str(garbage))  # no atoms and no calculator either
    assert garbage.read_text() == "garbage"


def test_a_restart_file_of_another_calculator_is_refused_and_kept(tmp_path):
    restart = tmp_path / "bo.json"
    first = lj_cluster()
    BOOptimizer(first, restart=str(restart), logfile=None, prior="max").run(fmax=0.05, steps=2)
    saved = restart.read_text()
    other = lj_cluster()
    other.calc = LennardJones(sigma=1.1, epsilon=1.0, rc=4.0)  # another sigma
    with pytest.raises(RestartError, match="another calculator .*sigma.*left untouched"):
        BOOptimizer(other, restart=str(restart), logfile=None, prior="max")
    assert restart.read_text() == saved
    # the same calculator behind a counting wrapper resumes, with no call repeated
    same = lj_cluster()
    same.calc = CountingCalculator(same.calc)
    BOOptimizer(same, restart=str(restart), logfile=None, prior="max").run(fmax=0.05, steps=0)
    assert same.calc.ncalls == 0


def test_bad_setups_are_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="needs a calculator"):
        BOOptimizer(molecule("H2O"))
    read_back = molecule("H2O")  # a frame read from a file: its results, no calculator
    read_back.calc = SinglePointCalculator(read_back, energy=0.0, forces=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="needs a calculator that computes: .*SinglePoint"):
        BOOptimizer(read_back)
    empty = Atoms()
    empty.calc = LennardJones()
    with pytest.raises(ValueError, match="no atoms.*give one atom or more"):
        BOOptimizer(empty)

    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"version": 1, "positions": [[[0, 0')
    with pytest.raises(RestartError, match="cannot be read.*left untouched"):
        BOOptimizer(lj_cluster(), restart=str(corrupt), logfile=None)
    assert corrupt.read_text() == '{"version": 1, "positions": [[[0, 0'

    restart = tmp_path / "water.json"
    water = perturbed_water()
    water.calc = get_calculator("gfn2")
    BOOptimizer(water, restart=str(restart), logfile=None).run(fmax=0.05, steps=1)
    saved = restart.read_text()
    with pytest.raises(RestartError, match="other atoms"):
        BOOptimizer(lj_cluster(), restart=str(restart), logfile=None)
    assert restart.read_text() == saved


def test_step_times_count_each_step_once_and_leave_out_the_calculator():
    from asebo.benchmarks.steptime import step_times

    class SlowLennardJones(LennardJones):
        """Lennard-Jones that burns 0.4 s of processor time per call."""

        def calculate(self, *args, **kwargs):
            start = time.process_time()
            while time.process_time() - start < 0.4:
                pass
            super().calculate(*args, **kwargs)

    times = step_times(lj_cluster(5), SlowLennardJones(), steps=6)
    assert times.shape == (6,)
    assert np.isfinite(times).all() and (times > 0).all()
    # a step of a 5-atom GP takes a few 0.01 s: the calculator's 0.4 s per call is
    # not counted as the optimizer's time
    assert np.median(times) < 0.4


def test_step_times_count_the_prior_calculators_calls_of_each_step():
    pytest.importorskip("tblite")
    from asebo.benchmarks.steptime import prior_per_step, step_times

    atoms = molecule("CH3OH")
    atoms.rattle(0.1, seed=1)
    marks = []
    times = step_times(atoms, "gfn2", steps=3, marks=marks, fmax=0.05, prior="gfn1")
    calls, seconds = prior_per_step(marks)
    assert calls.shape == seconds.shape == times.shape
    # every search on the model calls the prior, and only a prior call takes its time
    assert (calls >= 1).all() and (seconds > 0).all()


def test_command_line_relaxes_a_file_and_logs_predictions(tmp_path, capsys):
    from asebo.cli import main

    start = tmp_path / "cluster.xyz"
    lj_cluster(5).write(start)
    log = tmp_path / "cli.log"
    status = main(
        [
            "optimize",
            str(start),
            "--calc",
            "lj",
            "--fmax",
            "0.05",
            "--trajectory",
            str(tmp_path / "out.traj"),
            "--logfile",
            str(log),
        ]
    )
    assert status == 0
    relaxed = read(tmp_path / "cluster_relaxed.xyz")
    relaxed.calc = get_calculator("lj")
    assert np.linalg.norm(relaxed.get_forces(), axis=1).max() < 0.05
    assert "Predicted" in log.read_text()
    assert "converged after" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="cannot read"):
        main(["optimize", str(tmp_path / "missing.xyz")])


def test_auto_prior_takes_gfn2_under_another_calculator_and_says_so():
    import io

    from asebo.model.gp import CalculatorPrior

    atoms = molecule("H2O")
    atoms.calc = EMT()
    log = io.StringIO()
    opt = BOOptimizer(atoms, prior="auto", logfile=log)
    assert isinstance(opt.prior, CalculatorPrior)
    assert opt.prior.calculator.parameters["method"] == "GFN2-xTB"
    assert "prior='auto': GFN2-xTB" in log.getvalue()


def test_auto_prior_falls_back_where_gfn2_does_not_fit():
    from asebo.benchmarks.neb import Counted
    from asebo.model.default_prior import default_prior
    from asebo.model.priors import RecentredLindh

    target = molecule("H2O")
    target.calc = get_calculator("gfn2")
    auto = default_prior(target, "minimum", any_target=True)
    assert auto.prior == "lindh" and auto.rule == "tblite-target-minimum"
    target.calc = Counted(get_calculator("gfn2"))  # a wrapper computes with tblite too
    assert default_prior(target, "minimum", any_target=True).prior == "lindh"
    assert isinstance(BOOptimizer(target, prior="auto", logfile=None).prior, RecentredLindh)
    heavy = Atoms("Fr2", positions=[[0, 0, 0], [0, 0, 4.0]])
    heavy.calc = EMT()
    choice = default_prior(heavy, "minimum", any_target=True)
    assert choice.prior == "lindh" and "[87]" in choice.reason


class _Recording(Calculator):
    """EMT that records every geometry it computes."""

    implemented_properties = ["energy", "forces"]

    def __init__(self, seen):
        super().__init__()
        self.seen = seen
        self.inner = EMT()

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.seen.append(self.atoms.positions.copy())
        self.results = {
            "energy": self.inner.get_potential_energy(self.atoms),
            "forces": self.inner.get_forces(self.atoms),
        }


class _FailingAway(_Recording):
    """EMT that fails (as an SCF that does not converge) away from the recorded geometries."""

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        if not any(np.allclose(atoms.positions, p, atol=1e-9) for p in self.seen):
            raise CalculationFailed("SCF not converged in 250 cycles")
        Calculator.calculate(self, atoms, properties, system_changes)
        self.results = {
            "energy": self.inner.get_potential_energy(self.atoms),
            "forces": self.inner.get_forces(self.atoms),
        }


def test_a_failing_prior_calculator_turns_the_step_into_a_force_step():
    import io

    seen = []
    atoms = molecule("H2O")
    atoms.rattle(0.1, seed=3)
    atoms.calc = _Recording(seen)
    log = io.StringIO()
    opt = BOOptimizer(atoms, prior=_FailingAway(seen), logfile=log)
    opt.run(fmax=0.05, steps=3)
    assert len(opt.energies) == 4  # every step was taken
    assert "the prior calculator failed: CalculationFailed" in log.getvalue()
    # every search failed (retries exhausted) and each step went along the forces
    assert opt.reasons == ["force_step"] * 3
    assert all(proposal["retried"][0] == "prior_failed" for proposal in opt.proposals)
    for k in range(1, len(opt.energies)):
        best = int(np.argmin(opt.energies[:k]))
        step = (opt.positions_seen[k] - opt.positions_seen[best]).reshape(-1)
        forces = opt.forces[best].reshape(-1)
        cosine = step @ forces / np.linalg.norm(step) / np.linalg.norm(forces)
        assert cosine == pytest.approx(1.0, abs=1e-9)  # along the forces of the best
    assert opt.energies[-1] < opt.energies[0]


def test_a_prior_calculator_lets_the_steps_grow_to_calculator_prior_maxstep():
    CALCULATOR_PRIOR_MAXSTEP = TrustSettings().calculator_maxstep
    CALCULATOR_PRIOR_TRUST_RADIUS = TrustSettings().calculator_radius

    def steps(**options):
        atoms = lj_cluster()
        atoms.positions *= 1.4  # far from the minimum: the prior knows the way
        prior = LennardJones(sigma=1.0, epsilon=1.0, rc=4.0)
        opt = BOOptimizer(atoms, logfile=None, prior=prior, **options)
        assert opt.run(fmax=0.01, steps=100)
        positions = np.array(opt.positions_seen)  # (m, n, 3)
        longest = np.linalg.norm(np.diff(positions, axis=0), axis=2).max()
        first = np.abs(positions[1] - positions[0]).max()  # largest coordinate change
        return opt.maxstep, longest, first

    maxstep, longest, first = steps()
    assert maxstep == CALCULATOR_PRIOR_MAXSTEP
    assert 0.2 < longest <= CALCULATOR_PRIOR_MAXSTEP + 1e-9
    assert first == pytest.approx(CALCULATOR_PRIOR_TRUST_RADIUS)  # the first box's edge
    maxstep, longest, first = steps(maxstep=0.2, trust_radius=0.1)
    assert maxstep == 0.2 and longest <= 0.2 + 1e-9
    assert first == pytest.approx(0.1)
    assert BOOptimizer(lj_cluster(), logfile=None, prior="max").maxstep == 0.2


def test_a_step_beyond_maxstep_is_cut_back_on_its_line():
    from asebo.optimize.search import within_maxstep

    rng = np.random.default_rng(3)
    centre, step = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))  # (n, 3) each
    longest = np.linalg.norm(step, axis=1).max()
    cut = within_maxstep(centre, centre + step, 0.5 * longest)
    np.testing.assert_allclose(cut - centre, 0.5 * step, atol=1e-12)
    within = centre + 0.5 * step
    assert within_maxstep(centre, within, longest) is within


def test_a_step_whose_drop_the_model_doubts_is_refused():
    """check_confident refuses a proposal exactly when the GP's predicted drop from its
    mean at the centre is below ``confidence`` standard deviations of the variance it
    adds beyond the centre's."""
    from asebo.optimize.trust import UncertainStepError, check_confident

    atoms = perturbed_water()
    atoms.calc = get_calculator("gfn2")
    opt = BOOptimizer(atoms, logfile=None)
    opt.run(fmax=0.05, steps=1)
    gp = opt.fit_model()
    best = int(np.argmin(opt.energies))
    centre = opt.positions_seen[best]  # (3, 3)
    forces = opt.forces[best]
    direction = forces / np.linalg.norm(forces, axis=1).max()
    rng = np.random.default_rng(1)
    steps = [t * direction for t in (0.001, 0.01, 0.02, 0.03, 0.1)]
    steps += [t * rng.normal(size=(3, 3)) for t in (0.01, 0.03, 0.1, 0.3) for _ in range(3)]
    refused = []
    for step in steps:
        proposal = centre + step
        mean, variance = (
            v.numpy() for v in gp.posterior(torch.as_tensor(np.array([proposal, centre])))
        )
        drop = mean[1] - mean[0]
        uncertainty = np.sqrt(max(variance[0] - variance[1], 0.0))
        doubted = drop < uncertainty
        refused.append(doubted)
        if doubted:
            with pytest.raises(UncertainStepError, match="within 1 standard deviations"):
                check_confident(gp, centre, proposal, confidence=1.0)
        else:
            check_confident(gp, centre, proposal, confidence=1.0)
    assert any(refused) and not all(refused)
    # the centre's own variance (the noise on its observation) is no doubt about a
    # step: a short step along the forces passes even a demand of 1000 deviations,
    # which the centre's standard deviation alone would refuse
    short = centre + 0.001 * direction
    drop = float(gp.predict(centre) - gp.predict(short))
    assert 0 < drop < 1000 * float(gp.predict(centre, return_std=True)[1])
    check_confident(gp, centre, short, confidence=1000.0)


def test_a_doubt_that_no_shorter_step_removes_is_told_from_one_that_a_smaller_box_does():
    """Where the GP allows the gradients noise comparable to the forces (here under a
    constant prior, whose slope is the GP's alone), drop and doubt both grow as the
    step's length. check_confident, given the smallest box, checks the step cut to
    half, a quarter... down to the smallest box: where one of these passes, or the
    drop is surest at the shortest, it raises UncertainStepError (a smaller box helps);
    where none passes and a longer length is surer, SlopeNoiseError with the surest
    length. Without the smallest box every doubted step is an UncertainStepError."""
    from asebo.optimize.trust import SlopeNoiseError, UncertainStepError, check_confident

    floor = 1e-3  # Å
    outcomes = {}
    for gradient_noise in (2e-3, 1.0):
        atoms = molecule("H2O")
        atoms.rattle(stdev=0.05, seed=0)
        atoms.calc = get_calculator("gfn2")
        options = {"gradient_noise": gradient_noise}
        opt = BOOptimizer(atoms, logfile=None, prior="max", gp_options=options)
        opt.run(fmax=0.05, steps=1)
        gp = opt.fit_model()
        best = int(np.argmin(opt.energies))
        centre = opt.positions_seen[best]  # (3, 3)
        forces = opt.forces[best]
        direction = forces / np.abs(forces).max()  # largest coordinate 1 Å
        for length in (0.01, 0.1, 0.3):
            proposal = centre + length * direction
            fractions = [1.0]
            while fractions[-1] * length > floor:
                fractions.append(max(fractions[-1] / 2, floor / length))
            points = np.array([centre] + [centre + f * length * direction for f in fractions])
            mean, variance = (v.numpy() for v in gp.posterior(torch.as_tensor(points)))
            drops = mean[0] - mean[1:]  # (k,)
            deviations = np.sqrt(np.maximum(variance[1:] - variance[0], 1e-300))  # (k,)
            surest = int(np.argmax(drops / deviations))
            if drops[0] >= 3 * deviations[0]:
                check_confident(gp, centre, proposal, 3.0, floor)
                outcome = "confident"
            elif (drops >= 3 * deviations).any() or drops[-1] <= 0 or surest == len(drops) - 1:
                with pytest.raises(UncertainStepError):
                    check_confident(gp, centre, proposal, 3.0, floor)
                outcome = "smaller box"
            else:
                with pytest.raises(SlopeNoiseError) as error:
                    check_confident(gp, centre, proposal, 3.0, floor)
                assert error.value.length == pytest.approx(fractions[surest] * length)
                with pytest.raises(UncertainStepError):
                    check_confident(gp, centre, proposal, 3.0)
                outcome = "slope noise"
            outcomes.setdefault(gradient_noise, []).append(outcome)
    # the default noise resolves the slope: a long step is refused, a short one passes;
    # a noise of a gradient's whole prior deviation leaves every step in doubt
    assert outcomes[2e-3][0] == "confident" and "smaller box" in outcomes[2e-3]
    assert "slope noise" not in outcomes[2e-3]
    assert "slope noise" in outcomes[1.0] and "confident" not in outcomes[1.0]


def test_a_search_whose_doubt_is_the_slope_noise_is_repeated_once_where_it_is_surest(
    monkeypatch,
):
    """Where the check finds the doubt to be the slope's noise (SlopeNoiseError), the
    search is repeated once in a box the size of the surest length (the trust region
    cut to it), and that search's proposal stands: it is checked no more."""
    import asebo.optimize.search as search_module
    from asebo.optimize.trust import SlopeNoiseError

    events, minimize, check = [], search_module.minimize_lcb, search_module.check_confident

    def recorded_minimize(gp, starts, centre, radius, *args, **options):
        events.append(("search", radius))
        return minimize(gp, starts, centre, radius, *args, **options)

    def recorded_check(*args, **options):
        try:
            check(*args, **options)
        except SlopeNoiseError as error:
            events.append(("slope noise", error.length))
            raise
        events.append(("checked", None))

    monkeypatch.setattr(search_module, "minimize_lcb", recorded_minimize)
    monkeypatch.setattr(search_module, "check_confident", recorded_check)
    atoms = molecule("H2O")
    atoms.rattle(stdev=0.05, seed=0)
    atoms.calc = get_calculator("gfn2")
    options = {"gradient_noise": 1.0}
    opt = BOOptimizer(atoms, logfile=None, prior="max", gp_options=options)
    opt.run(fmax=0.05, steps=12)
    noisy = [k for k, (what, _) in enumerate(events) if what == "slope noise"]
    assert noisy
    floor = TrustSettings().floor
    for k in noisy:
        assert events[k + 1] == ("search", pytest.approx(max(events[k][1], floor)))
        assert k + 2 == len(events) or events[k + 2][0] == "search"
    retried = [why for proposal in opt.proposals for why in proposal["retried"]]
    assert retried.count("slope_noise") == len(noisy)


def water_model_with_an_egg_box_gain():
    """The GP of water after 2 steps under GFN2-xTB, refitted with the lowest energy
    5 meV lower, as a grid's egg-box gain would put it: the model, which allows noise,
    keeps its mean there above it. Returns the GP, the lowest configuration (3, 3)
    and its lowered energy."""
    atoms = perturbed_water()
    atoms.calc = get_calculator("gfn2")
    opt = BOOptimizer(atoms, logfile=None)
    opt.run(fmax=0.05, steps=2)
    positions, energies, forces = opt.observations.arrays()  # (m, 3, 3), (m,), (m, 3, 3)
    best = int(np.argmin(energies))
    energies[best] -= 0.005  # eV
    gp = opt.fit_model().fit(positions, energies, forces)
    return gp, positions[best], float(energies[best])


def test_a_lowest_energy_below_the_models_mean_does_not_refuse_every_step():
    """A grid's noise can put the lowest energy computed below the model's mean there,
    which allows for noise. A short step down the model's surface then lies above that
    energy by the model, yet the check passes it: the drop is measured from the mean
    at the centre, not from the energy computed, so the box does not halve to its
    floor on every step."""
    from asebo.optimize.trust import check_confident

    gp, centre, lowest = water_model_with_an_egg_box_gain()
    gradient = gp.predict(centre, return_gradient=True)[1]  # (3, 3)
    short = centre - 0.001 * gradient / np.linalg.norm(gradient, axis=1).max()
    mean = gp.predict(np.array([short, centre]))  # (2,)
    assert mean[0] < mean[1]
    assert mean[0] > lowest
    check_confident(gp, centre, short)


def rattled_formic_acid():
    """Formic acid at its GFN2-xTB minimum with 0.1 Å of noise on every coordinate."""
    from asebo.campaign.plan import perturbed_start

    reference = molecule("HCOOH")
    reference.calc = get_calculator("gfn2")
    BFGS(reference, logfile=None).run(fmax=0.01)
    atoms = perturbed_start(reference, "HCOOH", 2, 0.1, 7)
    atoms.calc = get_calculator("gfn2")
    return atoms


def test_steps_the_model_doubts_are_searched_again_in_a_smaller_box():
    """From a rattled start the model proposes steps whose predicted drop lies within
    its own uncertainty, and without the check some of them go uphill; with it the
    box shrinks before the call, the run climbs less often and needs no more calls."""
    runs = {}
    for checked in (True, False):
        settings = TrustSettings() if checked else TrustSettings(confidence=None)
        opt = BOOptimizer(rattled_formic_acid(), logfile=None, trust_region=settings)
        assert opt.run(fmax=0.05, steps=30)
        energies = np.array(opt.energies)
        uphill = sum(energies[k] > energies[:k].min() for k in range(1, len(energies)))
        retried = [why for proposal in opt.proposals for why in proposal["retried"]]
        runs[checked] = (uphill, len(energies), energies.min(), retried)
    assert "uncertain" in runs[True][3]
    assert "uncertain" not in runs[False][3]
    assert runs[True][0] < runs[False][0]
    assert runs[True][1] <= runs[False][1]
    assert runs[True][2] == pytest.approx(runs[False][2], abs=2e-3)


def test_a_search_again_in_a_smaller_box_starts_where_the_refused_one_ended(monkeypatch):
    """The smaller box holds the refused proposal's direction; its search starts at
    that proposal, clipped into the box, rather than from the first starts again."""
    import asebo.optimize.search as search_module

    searches, minimize = [], search_module.minimize_lcb
    original_search = search_module.search

    def recorded_search(context, starts):
        searches.append([])
        return original_search(context, starts)

    def recorded_minimize(gp, starts, centre, radius, *args, **options):
        found, lcb = minimize(gp, starts, centre, radius, *args, **options)
        searches[-1].append((starts.numpy().copy(), radius, found.numpy()))
        return found, lcb

    monkeypatch.setattr(search_module, "minimize_lcb", recorded_minimize)
    monkeypatch.setattr("asebo.optimize.engine.search", recorded_search)
    opt = BOOptimizer(rattled_formic_acid(), logfile=None)
    assert opt.run(fmax=0.05, steps=30)
    retried = [calls for calls in searches if len(calls) > 1]
    assert retried
    for calls in retried:
        for (_, radius, found), (starts, smaller, _) in zip(calls, calls[1:]):
            assert smaller == pytest.approx(max(radius / 2, TrustSettings().floor))
            np.testing.assert_array_equal(starts, found[None])


@pytest.mark.parametrize("prior", ["lindh", "gfn1"])
def test_the_search_stops_at_its_tolerance_per_moving_atom(monkeypatch, prior):
    """An energy is a sum over atoms: the search's stop is the tolerance times the
    atoms it moves, those no constraint holds; under a prior calculator, whose model
    is accurate, the calculator's tolerance."""
    import asebo.optimize.search as search_module
    from asebo.optimize.settings import SearchSettings

    tolerances, minimize = [], search_module.minimize_lcb

    def recorded_minimize(*args, **options):
        tolerances.append(args[-1])
        return minimize(*args, **options)

    monkeypatch.setattr(search_module, "minimize_lcb", recorded_minimize)
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.05, seed=1)
    atoms.set_constraint(FixAtoms(indices=[0, 1, 2]))
    atoms.calc = get_calculator("gfn2")
    settings = SearchSettings(tolerance=3e-7, calculator_tolerance=4e-8)
    options = {} if prior == "lindh" else {"prior": get_calculator(prior)}
    BOOptimizer(atoms, logfile=None, search=settings, **options).run(fmax=0.05, steps=2)
    per_atom = 3e-7 if prior == "lindh" else 4e-8
    assert tolerances
    assert tolerances == pytest.approx([per_atom * (len(atoms) - 3)] * len(tolerances))


class _QuadraticPrior(Prior):
    """``k |x - c|^2 / 2``, its offset 1 eV below the mean residual: a Cartesian GP on it
    puts a bump on each observation."""

    constant = False

    def __init__(self, centre, stiffness):
        self.centre, self.stiffness = centre.ravel(), stiffness

    def energies_and_gradients(self, positions):
        flat = np.asarray(positions).reshape(len(positions), -1) - self.centre  # (m, 3n)
        gradients = self.stiffness * flat
        return 0.5 * np.sum(flat * gradients, axis=1), gradients.reshape(positions.shape)

    def offset(self, energies, prior_energies):
        return float(np.mean(np.asarray(energies) - prior_energies)) - 1.0


def _water_after_two_steps():
    """The observations of two steps on water, their lowest configuration (3, 3) and
    a unit mode (3, 3) no configuration moved along."""
    atoms = perturbed_water()
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None)
    optimizer.run(fmax=0.05, steps=2)
    observations = optimizer.observations
    positions = observations.arrays()[0]
    x = positions[observations.best()]  # (3, 3)
    explored = (positions - x).reshape(len(positions), -1).T  # (9, m)
    basis = np.linalg.svd(explored, full_matrices=True)[0]  # (9, 9)
    unexplored = basis[:, np.linalg.matrix_rank(explored) :].T  # rows, unit, orthogonal
    return observations, x, unexplored[0].reshape(x.shape)


def _bumped_gp(observations, centre, stiffness):
    """A Cartesian GP on :class:`_QuadraticPrior` fitted to ``observations``."""
    from asebo.model.gp import EnergyForceGP

    prior = _QuadraticPrior(centre, stiffness)
    gp = EnergyForceGP(kernel="cartesian", fit_gamma=False, gamma=1.0, prior=prior)
    return gp.fit(*observations.arrays())


def test_a_step_along_which_only_the_interpolation_curves_down_is_refused():
    """A Cartesian GP whose constant lies 1 eV below every residual puts a bump on each
    observation, and the bump curves every direction no configuration moved along
    down, by ``r gamma`` (about 0.9 eV/Å² here), while the prior (a quadratic) curves
    up: a step that way is refused where the prior is softer than the bump, not where
    it is stiffer, and a lower configuration computed along the step lets it pass. The
    curvature read is the second difference of the posterior energy; the refusal
    carries the step's direction and the prior's curvature above the model's."""
    from asebo.optimize.model_hessian import directional_curvature
    from asebo.optimize.observations import Observations
    from asebo.optimize.trust import OverturnedCurvatureError, check_curvature_supported

    observations, x, mode = _water_after_two_steps()
    positions, energies, forces = observations.arrays()
    results = {}
    for stiffness in (0.05, 5.0):
        gp = _bumped_gp(observations, x, stiffness)
        h = 1e-3
        along = gp.predict(np.array([x + h * mode, x, x - h * mode]))  # (3,)
        second = (along[0] - 2 * along[1] + along[2]) / h**2
        assert directional_curvature(gp, x, mode.ravel()) == pytest.approx(second, rel=1e-3)
        results[stiffness] = gp, second
    soft, overturned = results[0.05]
    stiff, kept = results[5.0]
    assert overturned < 0.0 < kept
    with pytest.raises(OverturnedCurvatureError, match="curves down") as refused:
        check_curvature_supported(soft, x, x + 0.1 * mode, observations)
    np.testing.assert_allclose(refused.value.direction, mode.ravel(), atol=1e-12)
    assert refused.value.excess == pytest.approx(0.05 - overturned, rel=1e-3)
    check_curvature_supported(stiff, x, x + 0.1 * mode, observations)

    evidenced = Observations(observations.numbers)
    for computed in zip(positions, energies, forces):
        evidenced.append(*computed)
    evidenced.append(x + 0.05 * mode, energies.min() - 1e-3, forces[0])
    check_curvature_supported(soft, x, x + 0.1 * mode, evidenced)


def test_every_mode_only_the_interpolation_curves_down_along_is_found_and_corrected():
    """Each mode of the model's Hessian that curves down comes back with the prior's
    curvature above the model's; with those curvatures added the model no longer curves
    down along a step that mixes the lowest mode with the next; a configuration
    computed lower along a mode takes that mode out."""
    from asebo.optimize.model_hessian import (
        PROBE,
        directional_curvature,
        internal_basis,
        interpolated_descents,
        posterior_hessian,
        prior_curvature,
    )
    from asebo.optimize.search import curves_down

    observations, x, mode = _water_after_two_steps()
    free = np.ones((3, 3), dtype=bool)
    soft = _bumped_gp(observations, x, 0.05)
    modes, excesses = interpolated_descents(soft, x, free, observations.arrays())
    assert modes
    for found, excess in zip(modes, excesses):
        assert np.linalg.norm(found) == pytest.approx(1.0, abs=1e-12)
        model = directional_curvature(soft, x, found)
        assert model < 0.0
        prior = prior_curvature(soft.prior, x, found, PROBE)
        assert excess == pytest.approx(prior - model, rel=1e-3)
    # a step mostly along the lowest mode, partly along the next, in the vibrations (the
    # Cartesian GP curves the rotations too)
    internal = internal_basis(x, free)  # (9, 3)
    vectors = np.linalg.eigh(internal.T @ posterior_hessian(soft, x, free) @ internal)[1]
    lowest, next_lowest = (internal @ vectors[:, :2]).T
    step = np.cos(0.3) * lowest + np.sin(0.3) * next_lowest
    assert curves_down(soft, x, step, [], [])
    assert not curves_down(soft, x, step, modes, excesses)
    positions, energies, forces = observations.arrays()
    lower = x + 0.05 * modes[0].reshape(x.shape)  # computed lower along the first mode
    evidenced = (
        np.concatenate([positions, lower[None]]),
        np.append(energies, energies.min() - 1e-3),
        np.concatenate([forces, forces[:1]]),
    )
    remaining = interpolated_descents(soft, x, free, evidenced)[0]
    assert len(remaining) == len(modes) - 1
    assert all(abs(float(np.dot(kept, modes[0]))) < 1e-8 for kept in remaining)


def pyramidal_formaldehyde():
    """Formaldehyde with its carbon 0.3 Å out of the plane of its neighbours."""
    atoms = molecule("H2CO")  # O, C, H, H in the yz plane
    atoms.positions[1, 0] += 0.3
    atoms.rattle(0.03, seed=0)
    atoms.calc = get_calculator("gfn2")
    return atoms


@pytest.mark.parametrize("folded", [InternalCoordinates().folded, 0.0])
def test_a_planar_centre_relaxed_from_a_pyramidal_start_converges(folded, tmp_path):
    """The internal coordinates built at the pyramidal start fold as the carbon passes
    its neighbours' plane; the kernel then takes aligned positions, in the run and in
    a run resumed from its restart file. Without that switch (``folded = 0``) the
    model's gradients blow up and the run stalls."""
    kernel = InternalCoordinates(folded=folded)
    restart = str(tmp_path / "bo.json")
    log = io.StringIO()
    opt = BOOptimizer(pyramidal_formaldehyde(), logfile=log, restart=restart, kernel=kernel)
    converged = opt.run(fmax=0.05, steps=12)
    if not folded:
        assert not converged
        return
    assert converged
    assert "the internal coordinates fold" in log.getvalue()
    assert isinstance(opt.gp.metric, HessianMetric)
    resumed = BOOptimizer(pyramidal_formaldehyde(), logfile=None, restart=restart)
    assert isinstance(resumed.fit_model().metric, HessianMetric)


def test_the_search_keeps_botorchs_warnings_out_of_the_users_way():
    import warnings

    from ase.build import bulk
    from ase.calculators.emt import EMT
    from botorch.exceptions.warnings import BotorchWarning
    from gpytorch.utils.warnings import NumericalWarning

    atoms = bulk("Au") * 2
    atoms.rattle(stdev=0.005, seed=1)
    atoms.calc = EMT()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # a cell near its minimum: searches start where the model's variance is below
        # GPyTorch's floor, which it raises with a NumericalWarning
        BOOptimizer(FrechetCellFilter(atoms, exp_cell_factor=1.0), logfile=None).run(fmax=0.005)
    noise = (BotorchWarning, NumericalWarning)
    assert not [w for w in caught if issubclass(w.category, noise)]
