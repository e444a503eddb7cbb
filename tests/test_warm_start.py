"""Warm starts: the frames of earlier calculations as observations, from trajectories,
ase.db and Atoms, through cell filters too; what is refused, before any call."""

import numpy as np
import pytest
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixAtoms, FixedPlane
from ase.db import connect
from ase.filters import FrechetCellFilter
from ase.io import read, write
from ase.optimize import BFGS, LBFGS

from asebo import BOOptimizer
from asebo.optimize.observations import RestartError
from calculators import CountingCalculator, get_calculator


def ethanol():
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.1, seed=1)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    return atoms


@pytest.fixture(name="lbfgs_frames")
def fixture_lbfgs_frames(tmp_path):
    """An L-BFGS run on ethanol stopped after 6 calls: its trajectory."""
    atoms = ethanol()
    path = tmp_path / "lbfgs.traj"
    LBFGS(atoms, trajectory=str(path), logfile=None).run(fmax=0.01, steps=5)
    assert atoms.calc.ncalls == 6
    return path


def test_the_frames_are_observations_and_the_last_one_costs_no_call(lbfgs_frames):
    frames = read(lbfgs_frames, ":")
    atoms = frames[-1].copy()
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    opt = BOOptimizer(atoms, observations=lbfgs_frames, logfile=None)
    assert len(opt.observations) == 6 and atoms.calc.ncalls == 0
    gp = opt.fit_model()
    positions, energies, forces = opt.observations.arrays()
    for frame, position, energy, force in zip(frames, positions, energies, forces):
        assert np.array_equal(position, frame.positions)
        assert energy == frame.get_potential_energy()
        assert np.array_equal(force, frame.get_forces(apply_constraint=False))
    mean = gp.predict(positions)
    np.testing.assert_allclose(mean, energies, atol=2e-3)  # the GP has learnt them
    opt.run(fmax=0.01, steps=0)
    assert atoms.calc.ncalls == 0  # the atoms sit at the last frame


def test_a_warm_started_run_reaches_the_minimum_with_every_frame_once(lbfgs_frames, tmp_path):
    frames = read(lbfgs_frames, ":")
    atoms = frames[-1].copy()
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    trajectory = tmp_path / "bo.traj"
    opt = BOOptimizer(atoms, observations=lbfgs_frames, trajectory=str(trajectory), logfile=None)
    assert opt.run(fmax=0.01, steps=60)
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() < 0.01
    assert len(opt.observations) == 6 + atoms.calc.ncalls
    written = read(trajectory, ":")
    assert len(written) == len(opt.observations)  # the frames first, each call once
    for frame, positions in zip(written, opt.observations.positions):
        assert np.array_equal(frame.positions, positions)

    reference = ethanol()
    LBFGS(reference, logfile=None).run(fmax=0.01, steps=300)
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), abs=2e-3)


def test_replay_trajectory_of_ase_and_the_argument_agree(lbfgs_frames):
    frames = read(lbfgs_frames, ":")
    by_argument = BOOptimizer(ethanol(), observations=lbfgs_frames, logfile=None)
    by_replay = BOOptimizer(ethanol(), logfile=None)
    by_replay.replay_trajectory(str(lbfgs_frames))
    from_atoms = BOOptimizer(ethanol(), observations=frames, logfile=None)
    for opt in (by_replay, from_atoms):
        assert np.array_equal(opt.observations.arrays()[1], by_argument.observations.arrays()[1])
        assert np.array_equal(opt.observations.arrays()[0], by_argument.observations.arrays()[0])


def test_ase_db_rows_are_observations(lbfgs_frames, tmp_path):
    frames = read(lbfgs_frames, ":")
    with connect(tmp_path / "calcs.db") as db:
        for k, frame in enumerate(frames):
            db.write(frame, step=k)
    db = connect(tmp_path / "calcs.db")
    opt = BOOptimizer(ethanol(), observations=db.select("step<4"), logfile=None)
    assert len(opt.observations) == 4
    np.testing.assert_allclose(
        opt.observations.energies, [f.get_potential_energy() for f in frames[:4]]
    )
    whole = BOOptimizer(ethanol(), observations=tmp_path / "calcs.db", logfile=None)
    assert len(whole.observations) == 6


def test_a_resumed_run_given_the_same_frames_takes_none_twice(lbfgs_frames, tmp_path):
    restart = tmp_path / "bo.json"
    atoms = ethanol()
    BOOptimizer(atoms, restart=str(restart), observations=lbfgs_frames, logfile=None).run(
        fmax=0.01, steps=2
    )
    calls = atoms.calc.ncalls
    again = BOOptimizer(ethanol(), restart=str(restart), observations=lbfgs_frames, logfile=None)
    assert len(again.observations) == 6 + calls


def _frames_without(frames, name):
    stripped = []
    for frame in frames:
        results = {k: v for k, v in frame.calc.results.items() if k != name}
        copy = frame.copy()
        copy.calc = SinglePointCalculator(copy, **results)
        stripped.append(copy)
    return stripped


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda frames: [molecule("CH3OCH3")], "frame 0 holds other atoms"),
        (lambda frames: [frames[0], frames[1][:-1]], "frame 1 holds other atoms"),
        (lambda frames: _frames_without(frames, "forces"), "frame 0 has no forces"),
        (lambda frames: [frame.copy() for frame in frames], "has no energy or forces"),
    ],
)
def test_frames_that_are_not_observations_are_refused_before_any_call(lbfgs_frames, damage, match):
    frames = damage(read(lbfgs_frames, ":"))
    atoms = ethanol()
    with pytest.raises(ValueError, match=match):
        BOOptimizer(atoms, observations=frames, logfile=None)
    assert atoms.calc.ncalls == 0


def test_an_xyz_file_without_forces_is_refused(tmp_path):
    path = tmp_path / "plain.xyz"
    write(path, molecule("CH3CH2OH"))
    with pytest.raises(ValueError, match="frame 0 has no energy or forces"):
        BOOptimizer(ethanol(), observations=path, logfile=None)
    with pytest.raises(FileNotFoundError, match="no file"):
        BOOptimizer(ethanol(), observations=tmp_path / "missing.traj", logfile=None)


def _damaged_file(folder, damage):
    """A file of two frames of ethanol with energy and forces, then damaged."""
    frames = []
    for k in range(2):
        frame = molecule("CH3CH2OH")
        frame.calc = SinglePointCalculator(frame, energy=-k, forces=np.zeros((len(frame), 3)))
        frames.append(frame)
    suffix = ".json" if damage == "cut_json" else ".traj"
    path = folder / f"{damage}{suffix}"
    write(path, frames)
    content = path.read_bytes()
    damaged = {
        "cut_traj": content[: len(content) * 3 // 4],  # a write cut short
        "cut_json": content[: len(content) // 2],
        "random": np.random.default_rng(0).bytes(len(content)),
        "empty": b"",
    }[damage]
    path.write_bytes(damaged)
    return path


@pytest.mark.parametrize("damage", ["cut_traj", "cut_json", "random", "empty"])
def test_a_file_that_cannot_be_read_is_named_in_one_value_error(tmp_path, damage):
    path = _damaged_file(tmp_path, damage)
    atoms = ethanol()
    with pytest.raises(ValueError, match="observations: cannot read") as raised:
        BOOptimizer(atoms, observations=path, logfile=None)
    message = str(raised.value)
    assert repr(str(path)) in message and "give a complete ASE trajectory" in message
    assert "\n" not in message
    assert atoms.calc.ncalls == 0


def _copper_cell(a=3.7, seed=1):
    atoms = bulk("Cu", cubic=True, a=a)
    atoms.rattle(0.05, seed=seed)
    atoms.calc = CountingCalculator(EMT())
    return atoms


def test_frames_of_another_periodic_cell_need_a_filter(tmp_path):
    other = _copper_cell(a=3.65)
    other.get_forces()
    with pytest.raises(ValueError, match="another periodic cell.*cell filter"):
        BOOptimizer(_copper_cell(), observations=[other], logfile=None)


def test_frames_of_a_periodic_cell_are_refused_for_a_molecule_and_the_converse():
    water = molecule("H2O")
    water.calc = EMT()
    boxed = water.copy()
    boxed.set_cell([8.0, 8.0, 8.0])
    boxed.pbc = True
    boxed.calc = EMT()
    boxed.get_forces()
    with pytest.raises(ValueError, match=r"frame 0 has periodic boundary conditions \[True"):
        BOOptimizer(water, observations=[boxed], logfile=None)
    water.get_forces()
    with pytest.raises(ValueError, match=r"frame 0 has periodic boundary conditions \[False"):
        BOOptimizer(boxed, observations=[water], logfile=None)


def test_filter_frames_become_the_filters_generalized_positions_and_forces(tmp_path):
    path = tmp_path / "bfgs.traj"
    BFGS(FrechetCellFilter(_copper_cell()), trajectory=str(path), logfile=None).run(steps=3)
    frames = read(path, ":")
    atoms = _copper_cell()
    system = FrechetCellFilter(atoms)
    opt = BOOptimizer(system, observations=path, logfile=None)
    assert len(opt.observations) == 4 and atoms.calc.ncalls == 0
    for frame, positions, energy, forces in zip(frames, *opt.observations.arrays()):
        # ASE's own filter, on the original cell, at the frame's atoms and cell
        check = atoms.copy()
        check.calc = EMT()
        check.set_cell(frame.cell, scale_atoms=False)
        check.positions = frame.positions
        reference = FrechetCellFilter(check)
        reference.orig_cell = system.orig_cell
        np.testing.assert_allclose(positions, reference.get_positions(), atol=1e-10)
        np.testing.assert_allclose(forces, reference.get_forces(), atol=1e-10)
        assert energy == pytest.approx(reference.get_potential_energy(), abs=1e-10)
    without_stress = _frames_without(frames, "stress")
    with pytest.raises(ValueError, match="has no stress: .* energy, forces and stress"):
        BOOptimizer(FrechetCellFilter(_copper_cell()), observations=without_stress, logfile=None)


def test_the_hand_over_of_the_benchmark_counts_both_optimizers():
    from asebo.benchmarks.warmstart import handed_over

    start = molecule("CH3CH2OH")
    start.rattle(0.1, seed=1)
    warm = handed_over(start, "gfn2", after=4, fmax=0.05, steps=60)
    cold = handed_over(start, "gfn2", after=4, fmax=0.05, steps=60, warm=False)
    for result in (warm, cold):
        assert result["converged"] and result["fmax"] < 0.05
        assert result["calls"] == 4 + result["calls_after"] == len(result["energies"])
    # the same four L-BFGS calls before either hand-over (tblite's threaded SCF agrees
    # with itself to the last bits only)
    assert warm["energies"][:4] == pytest.approx(cold["energies"][:4], abs=1e-9)


def emt_frames(start, path, steps):
    """BFGS's trajectory from a copy of ``start`` with EMT, ``steps`` steps, at ``path``."""
    atoms = start.copy()
    atoms.calc = EMT()
    BFGS(atoms, trajectory=str(path), logfile=None).run(steps=steps)


def test_frames_that_moved_the_atoms_a_constraint_now_holds_are_refused(tmp_path):
    # frames of a free run with the methyl carbon since held by FixAtoms: the search
    # could reach none of them, and their lowest would be proposed again and again
    start = molecule("CH3OH")
    start.rattle(0.1, seed=1)
    emt_frames(start, tmp_path / "free.traj", steps=4)
    held = start.copy()
    held.set_constraint(FixAtoms(indices=[0]))
    held.calc = CountingCalculator(EMT())
    with pytest.raises(ValueError, match=r"frame \d+ has atom 0 .* Å from where this run's"):
        BOOptimizer(held, observations=str(tmp_path / "free.traj"), logfile=None)
    assert held.calc.ncalls == 0
    kept = start.copy()  # the same frames without the constraint are taken
    kept.calc = EMT()
    assert (
        len(BOOptimizer(kept, observations=str(tmp_path / "free.traj"), logfile=None).observations)
        == 5
    )


def tilted_plane():
    """A rattled Cu cluster; the constraint that holds atom 2 on a plane along no axis."""
    start = bulk("Cu", cubic=True) * (2, 1, 1)
    start.pbc, start.cell = False, None
    start.rattle(0.1, seed=3)
    return start, None, FixedPlane([2], (1.0, 1.0, 1.0))


def held_in_a_cell():
    """A rattled periodic Cu cell under a Fréchet filter; FixAtoms on atom 2."""
    start = bulk("Cu", "fcc", a=3.7, cubic=True) * (2, 1, 1)
    start.rattle(0.1, seed=3)
    return start, FrechetCellFilter, FixAtoms([2])


@pytest.mark.parametrize("case", [tilted_plane, held_in_a_cell])
def test_calls_a_new_constraint_cannot_reach_are_refused_from_frames_and_restart_files(
    case, tmp_path
):
    # calls of a free run cannot be reached once atom 2 is held (on a plane along no
    # axis, or in place under a cell filter): a model whose lowest point is one of them
    # proposes it again at every step, and such runs went on unconverged to their steps
    start, cell_filter, constraint = case()
    wrap = cell_filter or (lambda atoms: atoms)
    free = start.copy()
    free.calc = EMT()
    BFGS(wrap(free), trajectory=str(tmp_path / "free.traj"), logfile=None).run(steps=3)
    restart = str(tmp_path / "bo.json")
    free = start.copy()
    free.calc = EMT()
    BOOptimizer(wrap(free), restart=restart, logfile=None).run(fmax=0.01, steps=3)
    held = start.copy()
    held.set_constraint(constraint)
    held.calc = CountingCalculator(EMT())
    with pytest.raises(ValueError, match=r"frame \d+ has atom 2 .* Å from where this run's"):
        BOOptimizer(wrap(held), observations=str(tmp_path / "free.traj"), logfile=None)
    with pytest.raises(RestartError, match=r"configuration \d+, atom 2 stands .* Å from where"):
        BOOptimizer(wrap(held), restart=restart, logfile=None)
    assert held.calc.ncalls == 0
    # calls made under the constraint are taken and the run converges from them
    again = str(tmp_path / "held.json")
    BOOptimizer(wrap(held), restart=again, logfile=None).run(fmax=0.01, steps=3)
    made = held.calc.ncalls
    resumed = BOOptimizer(wrap(held), restart=again, logfile=None)
    assert len(resumed.observations) == made
    assert resumed.run(fmax=0.01, steps=100)


def test_the_summary_counts_the_calls_of_the_run_not_the_frames_it_was_given(tmp_path):
    start = molecule("H2O")
    start.rattle(0.05, seed=4)
    emt_frames(start, tmp_path / "bfgs.traj", steps=3)
    atoms = start.copy()
    atoms.calc = CountingCalculator(EMT())
    restart = str(tmp_path / "bo.json")
    opt = BOOptimizer(
        atoms, observations=str(tmp_path / "bfgs.traj"), restart=restart, logfile=None
    )
    opt.run(fmax=0.01, steps=3)
    assert f", {atoms.calc.ncalls} calls" in opt.summary()
    assert len(opt.energies) == atoms.calc.ncalls + 4
    resumed = start.copy()
    resumed.calc = EMT()
    assert BOOptimizer(resumed, restart=restart, logfile=None).observations.state["warm_start"] == 4
