"""Resumed runs: every evaluation once in the trajectory, no call after convergence,
the path of the uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ase.build import molecule
from ase.io import read
from killed_calls import PREAMBLE

from asebo import BOOptimizer
from asebo.model.priors import RecentredLindh
from asebo.optimize.observations import Observations
from asebo.optimize.representations import InternalCoordinates
from calculators import CountingCalculator, get_calculator


def water(seed=0):
    atoms = molecule("H2O")
    atoms.rattle(0.1, seed=seed)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    return atoms


def ethanol():
    """EMT is deterministic to the last bit, so the two paths can be compared exactly."""
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.1, seed=1)
    atoms.calc = CountingCalculator(get_calculator("emt"))
    return atoms


def assert_frames_are_the_observations(trajectory, restart, numbers):
    frames = read(trajectory, index=":")
    record = Observations.load(numbers, restart)
    assert len(frames) == len(record)
    for frame, positions, energy, forces in zip(
        frames, record.positions, record.energies, record.forces, strict=True
    ):
        np.testing.assert_array_equal(frame.positions, positions)
        assert frame.get_potential_energy() == energy
        np.testing.assert_array_equal(frame.get_forces(apply_constraint=False), forces)
    flat = np.array([f.positions.ravel() for f in frames])
    assert len(np.unique(flat, axis=0)) == len(frames)  # each configuration once
    return len(frames)


def test_every_evaluation_is_in_the_trajectory_once_after_many_resumes(tmp_path):
    restart, trajectory = str(tmp_path / "bo.json"), str(tmp_path / "bo.traj")
    calls, converged = 0, False
    for _ in range(4):  # three resumes
        atoms = water()
        converged = BOOptimizer(atoms, restart=restart, trajectory=trajectory, logfile=None).run(
            fmax=0.001, steps=1
        )
        calls += atoms.calc.ncalls
    assert not converged
    atoms = water()
    assert BOOptimizer(atoms, restart=restart, trajectory=trajectory, logfile=None).run(
        fmax=0.001, steps=50
    )
    calls += atoms.calc.ncalls
    assert assert_frames_are_the_observations(trajectory, restart, atoms.numbers) == calls
    # the final geometry is the last frame
    np.testing.assert_array_equal(read(trajectory).positions, atoms.positions)


def test_a_fresh_trajectory_after_a_resume_receives_every_observation(tmp_path):
    restart = str(tmp_path / "bo.json")
    first = water()
    BOOptimizer(first, restart=restart, logfile=None).run(fmax=0.01, steps=3)
    trajectory = str(tmp_path / "bo.traj")
    atoms = water()
    BOOptimizer(
        atoms, restart=restart, trajectory=trajectory, logfile=None, append_trajectory=False
    ).run(fmax=0.01, steps=2)
    total = first.calc.ncalls + atoms.calc.ncalls
    assert assert_frames_are_the_observations(trajectory, restart, atoms.numbers) == total


def test_without_a_restart_file_the_trajectory_starts_afresh_unless_appending(tmp_path):
    trajectory = str(tmp_path / "bo.traj")
    first = water()
    BOOptimizer(first, trajectory=trajectory, logfile=None).run(fmax=0.01, steps=2)
    again = water(1)
    BOOptimizer(again, trajectory=trajectory, logfile=None).run(fmax=0.01, steps=2)
    assert len(read(trajectory, index=":")) == again.calc.ncalls
    more = water(2)
    BOOptimizer(more, trajectory=trajectory, logfile=None, append_trajectory=True).run(
        fmax=0.01, steps=2
    )
    assert len(read(trajectory, index=":")) == again.calc.ncalls + more.calc.ncalls


def test_a_converged_restart_reports_convergence_without_a_call(tmp_path):
    restart, trajectory = str(tmp_path / "bo.json"), str(tmp_path / "bo.traj")
    first = water()
    assert BOOptimizer(first, restart=restart, trajectory=trajectory, logfile=None).run(
        fmax=0.01, steps=50
    )
    saved = Path(restart).read_text()
    again = water()  # the original start, as a user would pass it again
    log = tmp_path / "again.log"
    opt = BOOptimizer(again, restart=restart, trajectory=trajectory, logfile=str(log))
    assert opt.run(fmax=0.01, steps=50)
    assert again.calc.ncalls == 0 and opt.nsteps == 0
    np.testing.assert_array_equal(again.positions, first.positions)
    assert Path(restart).read_text() == saved
    assert len(read(trajectory, index=":")) == first.calc.ncalls
    assert f"{first.get_potential_energy():15.6f}" in log.read_text()
    # a tighter threshold than the last configuration meets goes on from there
    tighter = 0.5 * np.linalg.norm(first.get_forces(), axis=1).max()
    assert BOOptimizer(again, restart=restart, logfile=None).run(fmax=tighter, steps=50)
    assert again.calc.ncalls > 0


def test_a_restart_file_with_a_reason_of_a_removed_stage_resumes(tmp_path):
    """Files written before the flat-centre stage was removed may record ``'tilt'``."""
    restart = tmp_path / "bo.json"
    BOOptimizer(water(), restart=str(restart), logfile=None).run(fmax=0.01, steps=2)
    stored = json.loads(restart.read_text())
    stored["proposals"][0]["reason"] = "tilt"
    restart.write_text(json.dumps(stored))
    opt = BOOptimizer(water(), restart=str(restart), logfile=None)
    assert opt.reasons[0] == "tilt"
    assert opt.run(fmax=0.01, steps=50)
    assert opt.reasons[0] == "tilt" and "tilt" not in opt.reasons[1:]


@pytest.mark.parametrize("every", [1, 3])
def test_resumed_run_follows_the_uninterrupted_path_exactly(tmp_path, every):
    """The default kernel and (Lindh) prior; resumed every ``every`` steps."""
    steps = 12
    uninterrupted = ethanol()
    opt = BOOptimizer(uninterrupted, logfile=None)
    opt.run(fmax=0.01, steps=steps)
    assert isinstance(opt.representation, InternalCoordinates)
    assert isinstance(opt.prior, RecentredLindh)
    path = np.array(opt.positions_seen)  # (steps + 1, n, 3)

    restart = str(tmp_path / "bo.json")
    calls = 0
    for _ in range(steps // every):
        atoms = ethanol()
        BOOptimizer(atoms, restart=restart, logfile=None).run(fmax=0.01, steps=every)
        calls += atoms.calc.ncalls
    resumed = Observations.load(atoms.numbers, restart)
    np.testing.assert_array_equal(np.array(resumed.positions), path)
    assert resumed.state["proposals"] == opt.proposals  # the same reasons, recorded
    np.testing.assert_array_equal(atoms.positions, uninterrupted.positions)
    assert calls == uninterrupted.calc.ncalls == steps + 1


KILLED_RUN = PREAMBLE + textwrap.dedent("""
    from ase.build import molecule
    from ase.calculators.emt import EMT
    from killed_calls import killed_at_call
    from asebo import BOOptimizer

    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.1, seed=1)
    atoms.calc = killed_at_call(EMT, sys.argv[3], int(sys.argv[4]))()
    BOOptimizer(atoms, restart=sys.argv[1], trajectory=sys.argv[2], logfile=None).run(
        fmax=0.01, steps=int(sys.argv[5]))
""")


def test_a_damaged_trajectory_is_set_aside_and_written_afresh(tmp_path):
    """A frame cut short (a write killed, a full disk) is not appended to: the file is
    moved aside, and every observation is written again."""
    restart, trajectory = str(tmp_path / "bo.json"), tmp_path / "bo.traj"
    BOOptimizer(ethanol(), restart=restart, trajectory=str(trajectory), logfile=None).run(
        fmax=0.01, steps=4
    )
    damaged = trajectory.read_bytes()[:-100]
    trajectory.write_bytes(damaged)
    log = tmp_path / "bo.log"
    atoms = ethanol()
    opt = BOOptimizer(atoms, restart=restart, trajectory=str(trajectory), logfile=str(log))
    opt.run(fmax=0.01, steps=2)
    assert "cannot be read to its end" in log.read_text()
    assert (tmp_path / "bo.traj.damaged").read_bytes() == damaged  # nothing lost
    assert assert_frames_are_the_observations(trajectory, restart, atoms.numbers) == len(
        opt.observations
    )


def test_a_trajectory_longer_than_the_restart_record_is_set_aside(tmp_path):
    """An older restart file beside a later trajectory: the frames would not be the
    observations, so the trajectory is written afresh from the record."""
    restart, trajectory = tmp_path / "bo.json", tmp_path / "bo.traj"
    BOOptimizer(ethanol(), restart=str(restart), trajectory=str(trajectory), logfile=None).run(
        fmax=0.01, steps=2
    )
    older = restart.read_text()
    BOOptimizer(ethanol(), restart=str(restart), trajectory=str(trajectory), logfile=None).run(
        fmax=0.01, steps=4
    )
    restart.write_text(older)
    log = tmp_path / "bo.log"
    atoms = ethanol()
    opt = BOOptimizer(atoms, restart=str(restart), trajectory=str(trajectory), logfile=str(log))
    opt.run(fmax=0.01, steps=1)
    assert "holds 7 frames for 3 observations" in log.read_text()
    assert len(read(tmp_path / "bo.traj.damaged", ":")) == 7
    assert assert_frames_are_the_observations(trajectory, str(restart), atoms.numbers) == len(
        opt.observations
    )


def test_kill_9_then_resume_keeps_every_frame_once(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    restart, trajectory, calls = (
        str(tmp_path / name) for name in ("bo.json", "bo.traj", "calls.txt")
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for kill_at in (4, 7):
        killed = subprocess.run(
            [sys.executable, str(script), restart, trajectory, calls, str(kill_at), "20"],
            check=False,
            capture_output=True,
            text=True,
            env=env,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = subprocess.run(
        [sys.executable, str(script), restart, trajectory, calls, "0", "4"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr
    evaluated = Path(calls).read_text().splitlines()
    # 3 + 3 calls before the kills; the pending proposal and 4 steps after
    assert len(evaluated) == len(set(evaluated)) == 11
    atoms = molecule("CH3CH2OH")
    assert assert_frames_are_the_observations(trajectory, restart, atoms.numbers) == 11


def test_an_open_trajectory_receives_every_evaluation(tmp_path):
    from ase.io.trajectory import Trajectory

    restart = str(tmp_path / "bo.json")
    atoms = water()
    with Trajectory(str(tmp_path / "open.traj"), "w") as trajectory:
        BOOptimizer(atoms, restart=restart, trajectory=trajectory, logfile=None).run(
            fmax=0.01, steps=3
        )
    assert (
        assert_frames_are_the_observations(str(tmp_path / "open.traj"), restart, atoms.numbers)
        == atoms.calc.ncalls
        == 4
    )
