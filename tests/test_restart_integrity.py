"""What a restart file and a warm start may be resumed or taken from: the run's own
start, kernel, prior and calculator; one process at a time; every result of the
calculator in the frames; the file's permissions."""

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.calculators.singlepoint import SinglePointCalculator
from ase.db import connect
from ase.filters import FrechetCellFilter
from ase.io import read, write
from ase.optimize import BFGS, LBFGS, RestartError

from asebo import BOOptimizer
from asebo.optimize.observations import Observations
from calculators import CountingCalculator, get_calculator


def ethanol(seed=1, calc=EMT):
    """EMT is deterministic to the last bit, so that paths can be compared exactly."""
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.1, seed=seed)
    atoms.calc = CountingCalculator(calc())
    return atoms


def dimethyl_ether():
    """Ethanol's atomic numbers in ethanol's order, another molecule."""
    atoms = molecule("CH3OCH3")[[0, 2, 1, 3, 4, 5, 6, 7, 8]]
    atoms.calc = CountingCalculator(EMT())
    return atoms


def relaxed(tmp_path, steps=3, **options):
    """A run of ethanol cut short with a restart file and a trajectory; their paths."""
    restart, trajectory = tmp_path / "bo.json", tmp_path / "bo.traj"
    BOOptimizer(
        ethanol(), restart=str(restart), trajectory=str(trajectory), logfile=None, **options
    ).run(fmax=0.01, steps=steps)
    return restart, trajectory


# ---- the start of the run -------------------------------------------------------------
@pytest.mark.parametrize(
    "other", [dimethyl_ether, lambda: ethanol(seed=2)], ids=["dimethyl ether", "new start"]
)
def test_a_restart_file_of_another_start_is_refused_before_any_call(tmp_path, other):
    restart, _ = relaxed(tmp_path)
    saved = restart.read_text()
    atoms = other()
    with pytest.raises(RestartError, match=r"holds a run from another start: .* Å .*same start"):
        BOOptimizer(atoms, restart=str(restart), logfile=None)
    assert atoms.calc.ncalls == 0
    assert restart.read_text() == saved


def test_a_cell_filter_from_another_start_or_cell_is_refused(tmp_path):
    def copper(a=3.6, seed=1):
        atoms = bulk("Cu", cubic=True, a=a)
        atoms.rattle(0.05, seed=seed)
        atoms.calc = CountingCalculator(EMT())
        return atoms

    restart = str(tmp_path / "cell.json")
    BOOptimizer(FrechetCellFilter(copper()), restart=restart, logfile=None).run(fmax=0.01, steps=2)
    resumed = BOOptimizer(FrechetCellFilter(copper()), restart=restart, logfile=None)
    assert len(resumed.observations) == 3
    for other in (copper(seed=2), copper(a=3.65)):
        with pytest.raises(RestartError, match="another start"):
            BOOptimizer(FrechetCellFilter(other), restart=restart, logfile=None)
        assert other.calc.ncalls == 0


def test_the_start_a_configuration_computed_and_a_rounded_start_resume(tmp_path):
    restart, trajectory = relaxed(tmp_path)
    record = Observations.load(ethanol().numbers, str(restart))
    assert len(record) == 4
    write(tmp_path / "start.xyz", ethanol())  # positions rounded to the file's digits
    for atoms in (ethanol(), read(trajectory), read(trajectory, 1), read(tmp_path / "start.xyz")):
        atoms.calc = CountingCalculator(EMT())
        BOOptimizer(atoms, restart=str(restart), logfile=None)
        assert atoms.calc.ncalls == 0


def test_an_older_restart_file_without_its_start_still_resumes(tmp_path):
    restart, _ = relaxed(tmp_path)
    content = json.loads(restart.read_text())
    del content["start"], content["kernel"], content["prior"], content["prior_calculator"]
    restart.write_text(json.dumps(content))
    opt = BOOptimizer(ethanol(seed=2), restart=str(restart), logfile=None)
    assert len(opt.observations) == 4


# ---- the kernel and the prior ---------------------------------------------------------
@pytest.mark.parametrize(
    ("first", "again", "match"),
    [
        ({"kernel": "svd"}, {"kernel": "internal"}, "kernel 'svd', not 'internal' as given"),
        ({"prior": "max"}, {"prior": "lindh"}, "prior 'max', not 'lindh' as given"),
        (
            {"prior": LennardJones(sigma=1.2)},
            {"prior": LennardJones(sigma=1.0)},
            r"prior 'LennardJones' .*sigma.*1\.2.*, not 'LennardJones' .* as given",
        ),
    ],
    ids=["kernel", "prior", "prior calculator"],
)
def test_a_resume_with_another_kernel_or_prior_is_refused(tmp_path, first, again, match):
    restart, _ = relaxed(tmp_path, steps=1, **first)
    saved = restart.read_text()
    atoms = ethanol()
    with pytest.raises(RestartError, match=f"{match}: pass the same"):
        BOOptimizer(atoms, restart=str(restart), logfile=None, **again)
    assert atoms.calc.ncalls == 0 and restart.read_text() == saved
    same = BOOptimizer(ethanol(), restart=str(restart), logfile=None, **first)
    assert len(same.observations) == 2


def test_a_resume_without_kernel_or_prior_resumes_and_says_what_it_takes(tmp_path):
    restart, _ = relaxed(tmp_path, steps=1, kernel="svd", prior="max")
    log = tmp_path / "again.log"
    opt = BOOptimizer(ethanol(), restart=str(restart), logfile=str(log))
    assert len(opt.observations) == 2
    text = log.read_text()
    assert "the restart file's run took kernel 'svd'; this one takes 'internal'" in text
    assert "the restart file's run took prior 'max'; this one takes 'lindh'" in text


# ---- warm starts: the frames' calculator ----------------------------------------------
@pytest.fixture(name="emt_frames")
def fixture_emt_frames(tmp_path):
    """A BFGS run on ethanol with EMT: its trajectory and an ase.db of its frames."""
    atoms = ethanol()
    atoms.calc = EMT()
    BFGS(atoms, trajectory=str(tmp_path / "emt.traj"), logfile=None).run(fmax=0.01, steps=3)
    frames = read(tmp_path / "emt.traj", ":")
    with connect(tmp_path / "emt.db") as db:
        for frame in frames:
            db.write(frame)
    return tmp_path / "emt.traj", tmp_path / "emt.db"


def test_frames_of_another_calculator_are_refused_before_any_call(emt_frames):
    for source in (*emt_frames, connect(emt_frames[1]).select()):
        atoms = ethanol(calc=lambda: get_calculator("gfn2"))
        with pytest.raises(
            ValueError,
            match=r"frame 0 was computed by emt, not by this run's calculator \(tblite\)",
        ):
            BOOptimizer(atoms, observations=source, logfile=None)
        assert atoms.calc.ncalls == 0


def test_frames_of_the_same_calculator_or_without_a_name_are_taken(emt_frames):
    opt = BOOptimizer(ethanol(), observations=emt_frames[0], logfile=None)  # EMT behind a counter
    assert len(opt.observations) == 4
    by_hand = []
    for frame in read(emt_frames[0], ":"):
        plain = frame.copy()
        plain.calc = SinglePointCalculator(
            plain, energy=frame.get_potential_energy(), forces=frame.get_forces()
        )
        by_hand.append(plain)
    atoms = ethanol(calc=lambda: get_calculator("gfn2"))
    assert len(BOOptimizer(atoms, observations=by_hand, logfile=None).observations) == 4


def test_the_frames_asebo_writes_name_its_calculator(tmp_path):
    _, trajectory = relaxed(tmp_path, steps=1)
    assert {frame.calc.name for frame in read(trajectory, ":")} == {"emt"}
    atoms = ethanol(calc=lambda: get_calculator("gfn2"))
    with pytest.raises(ValueError, match="computed by emt"):
        BOOptimizer(atoms, observations=trajectory, logfile=None)


# ---- warm starts: the frames' calculator settings --------------------------------------
def water(calc, counted=True):
    """Rattled water with ``calc``, behind a counter where ``counted``."""
    atoms = molecule("H2O")
    atoms.rattle(0.05, seed=0)
    atoms.calc = CountingCalculator(calc) if counted else calc
    return atoms


@pytest.fixture(name="gfn1_frames", scope="module")
def fixture_gfn1_frames(tmp_path_factory):
    """Three BFGS steps on water with tblite's GFN1-xTB: the trajectory, an ase.db file
    of its frames, and asebo's trajectory of the same calculator."""
    from tblite.ase import TBLite

    folder = tmp_path_factory.mktemp("gfn1")
    atoms = water(TBLite(method="GFN1-xTB", verbosity=0), counted=False)
    BFGS(atoms, trajectory=str(folder / "bfgs.traj"), logfile=None).run(fmax=0.01, steps=3)
    with connect(folder / "bfgs.db") as db:
        for frame in read(folder / "bfgs.traj", ":"):
            db.write(frame)
    ours = water(TBLite(method="GFN1-xTB", verbosity=0))
    BOOptimizer(ours, trajectory=str(folder / "bo.traj"), logfile=None).run(fmax=0.01, steps=2)
    return folder


@pytest.mark.parametrize("source", ["bfgs.traj", "bfgs.db", "rows", "bo.traj"])
@pytest.mark.parametrize("preset", [True, False], ids=["preset", "TBLite"])
def test_frames_of_gfn1_are_refused_for_a_gfn2_run_before_any_call(gfn1_frames, source, preset):
    from tblite.ase import TBLite

    frames = connect(gfn1_frames / "bfgs.db").select() if source == "rows" else gfn1_frames / source
    atoms = water(get_calculator("gfn2") if preset else TBLite(method="GFN2-xTB", verbosity=0))
    with pytest.raises(
        ValueError,
        match=r"frame 0 was computed by tblite with method='GFN1-xTB', not with this run's "
        r"method='GFN2-xTB'",
    ):
        BOOptimizer(atoms, observations=frames, logfile=None)
    assert atoms.calc.ncalls == 0


def test_frames_of_gfn2_are_refused_for_a_gfn1_run(tmp_path):
    from tblite.ase import TBLite

    atoms = water(TBLite(method="GFN2-xTB", verbosity=0), counted=False)
    BFGS(atoms, trajectory=str(tmp_path / "gfn2.traj"), logfile=None).run(fmax=0.01, steps=1)
    run = water(get_calculator("gfn1"))
    with pytest.raises(
        ValueError, match="with method='GFN2-xTB', not with this run's method='GFN1"
    ):
        BOOptimizer(run, observations=tmp_path / "gfn2.traj", logfile=None)


def test_frames_of_the_same_method_are_taken_whatever_their_output_settings(gfn1_frames):
    from tblite.ase import TBLite

    for calc in (get_calculator("gfn1"), TBLite(method="GFN1-xTB", verbosity=0, cache_api=False)):
        for source in ("bfgs.traj", "bfgs.db", "bo.traj"):
            opt = BOOptimizer(water(calc), observations=gfn1_frames / source, logfile=None)
            assert len(opt.observations) == len(read(gfn1_frames / source, ":"))
            assert opt.atoms.calc.ncalls == 0


def test_frames_that_name_the_calculator_without_its_parameters_are_taken_and_noted(
    gfn1_frames, tmp_path
):
    unrecorded = []
    for frame in read(gfn1_frames / "bfgs.traj", ":"):
        plain = frame.copy()
        plain.calc = SinglePointCalculator(
            plain, energy=frame.get_potential_energy(), forces=frame.get_forces()
        )
        plain.calc.name = "tblite"
        unrecorded.append(plain)
    log = tmp_path / "bo.log"
    opt = BOOptimizer(water(get_calculator("gfn1")), observations=unrecorded, logfile=str(log))
    assert len(opt.observations) == len(unrecorded)
    assert "record none of its parameters" in log.read_text()
    default = tmp_path / "default.log"
    BOOptimizer(water(get_calculator("gfn2")), observations=unrecorded, logfile=str(default))
    assert "record none of its parameters" not in default.read_text()


# ---- a warm-started run resumed -------------------------------------------------------
def test_a_warm_started_run_resumed_by_the_same_script_follows_the_uninterrupted_path(tmp_path):
    start = ethanol()
    LBFGS(start, trajectory=str(tmp_path / "lbfgs.traj"), logfile=None).run(fmax=0.01, steps=3)
    frames = str(tmp_path / "lbfgs.traj")

    def script(restart, steps):
        atoms = read(frames)
        atoms.calc = CountingCalculator(EMT())
        BOOptimizer(atoms, restart=restart, observations=frames, logfile=None).run(
            fmax=0.001, steps=steps
        )
        return atoms

    uninterrupted = script(str(tmp_path / "one.json"), 12)
    restart = str(tmp_path / "two.json")
    for steps in (2, 5, 5):  # stopped after 2 steps, then after 5 more
        resumed = script(restart, steps)
    path = Observations.load(start.numbers, str(tmp_path / "one.json")).positions
    again = Observations.load(start.numbers, restart).positions
    assert len(path) == len(again) == 4 + 12
    np.testing.assert_allclose(np.array(again), np.array(path), rtol=0, atol=1e-10)
    np.testing.assert_allclose(resumed.positions, uninterrupted.positions, rtol=0, atol=1e-10)


# ---- one process at a time ------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys
    from ase.build import molecule
    from ase.calculators.emt import EMT
    from asebo import BOOptimizer

    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.1, seed=1)
    atoms.calc = EMT()
    opt = BOOptimizer(atoms, restart=sys.argv[1], logfile=None)
    opt.run(fmax=0.01, steps=1)
    print("holding", flush=True)
    sys.stdin.readline()
""")


def test_a_restart_file_in_use_by_another_process_is_refused(tmp_path):
    restart = tmp_path / "bo.json"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), str(restart)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        saved = restart.read_text()
        atoms = ethanol()
        with pytest.raises(
            RestartError,
            match=rf"restart file {restart} is in use by another process \(pid {holder.pid}\): "
            "wait for it or pass another restart file",
        ):
            BOOptimizer(
                atoms,
                restart=str(restart),
                trajectory=str(tmp_path / "t.traj"),
                logfile=str(tmp_path / "bo.log"),
            )
        assert atoms.calc.ncalls == 0 and restart.read_text() == saved
        assert not (tmp_path / "t.traj").exists()
        log = tmp_path / "bo.log"
        assert not log.exists() or log.read_text() == ""  # the error is the one line
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # the holder dies without releasing anything
        holder.wait()
    opt = BOOptimizer(ethanol(), restart=str(restart), logfile=None)  # no stale lock
    assert len(opt.observations) == 2
    second = BOOptimizer(ethanol(), restart=str(restart), logfile=None)  # this process's own
    opt.close()
    second.close()


def test_a_closed_optimizer_releases_the_lock_for_another_process(tmp_path):
    restart = tmp_path / "bo.json"
    opt = BOOptimizer(ethanol(), restart=str(restart), logfile=None)
    opt.run(fmax=0.01, steps=1)
    opt.close()
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    other = subprocess.run(
        [sys.executable, str(script), str(restart)],
        input="\n",
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout == "holding\n"


# ---- every result of the calculator ---------------------------------------------------
def test_frames_carry_the_calculators_charges_and_dipole_across_a_resume(tmp_path):
    restart, trajectory = str(tmp_path / "bo.json"), str(tmp_path / "bo.traj")

    def water():
        atoms = molecule("H2O")
        atoms.rattle(0.1, seed=0)
        atoms.calc = CountingCalculator(get_calculator("gfn2"))
        return atoms

    BOOptimizer(water(), restart=restart, trajectory=trajectory, logfile=None).run(
        fmax=0.01, steps=2
    )
    fresh = str(tmp_path / "fresh.traj")  # every frame written from the restart file
    BOOptimizer(
        water(), restart=restart, trajectory=fresh, append_trajectory=False, logfile=None
    ).run(fmax=0.01, steps=1)
    first, later = read(trajectory, ":"), read(fresh, ":")
    assert len(first) == 3 and len(later) == 4
    for frame in (*first, *later):
        reference = frame.copy()
        reference.calc = get_calculator("gfn2")
        reference.get_forces()
        for name in ("charges", "dipole"):
            np.testing.assert_allclose(
                frame.calc.results[name], reference.calc.results[name], rtol=0, atol=1e-4
            )
        assert frame.calc.results["free_energy"] == pytest.approx(
            reference.get_potential_energy(), abs=1e-5
        )
    for a, b in zip(first, later[:3], strict=True):
        np.testing.assert_array_equal(a.get_charges(), b.get_charges())


# ---- the file's permissions -----------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_the_restart_file_follows_the_umask(tmp_path, umask, mode):
    restart = tmp_path / "bo.json"
    old = os.umask(umask)
    try:
        BOOptimizer(ethanol(), restart=str(restart), logfile=None).run(fmax=0.01, steps=1)
    finally:
        os.umask(old)
    assert stat.S_IMODE(Path(restart).stat().st_mode) == mode


def test_two_optimizers_given_one_restart_file_lose_no_call_of_the_first(tmp_path):
    # one process shares the file's lock between its optimizers: the second to write
    # finds the file written by the first since it read it, and leaves it as it is
    restart = str(tmp_path / "shared.json")
    first = BOOptimizer(ethanol(), restart=restart, logfile=None)
    second = BOOptimizer(ethanol(), restart=restart, logfile=None)
    first.run(fmax=0.01, steps=2)
    written = Path(restart).read_bytes()
    with pytest.raises(RestartError, match="written by another optimizer since this run"):
        second.run(fmax=0.01, steps=2)
    assert Path(restart).read_bytes() == written
    assert len(Observations.load(ethanol().numbers, restart)) == 3
    first.run(fmax=0.01, steps=1)  # the first goes on writing its own file
    assert len(Observations.load(ethanol().numbers, restart)) == 4


def test_a_periodic_start_wrapped_into_its_cell_resumes_without_a_call(tmp_path):
    # an atom a lattice vector away is the same configuration of a periodic cell
    def copper():
        atoms = bulk("Cu", cubic=True) * (2, 1, 1)
        del atoms[0]
        atoms.positions[0] += [-0.3, 0.05, 0.0]  # past the cell's face
        atoms.calc = CountingCalculator(EMT())
        return atoms

    restart = str(tmp_path / "wrapped.json")
    BOOptimizer(copper(), restart=restart, logfile=None).run(fmax=0.01, steps=2)
    wrapped = copper()
    wrapped.wrap()
    assert np.abs(wrapped.positions - copper().positions).max() > 3.0
    resumed = BOOptimizer(wrapped, restart=restart, logfile=None)
    assert len(resumed.observations) == 3 and wrapped.calc.ncalls == 0
    moved = copper()
    moved.positions[0] += [0.2, 0.0, 0.0]
    with pytest.raises(RestartError, match="another start"):
        BOOptimizer(moved, restart=restart, logfile=None)
