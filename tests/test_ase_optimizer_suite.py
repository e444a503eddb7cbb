"""ASE's own optimizer tests, with BOOptimizer in place of the optimizer they name.

Kept close to the text of ``ase/test/optimize/`` in ASE 3.29.0: ``test_optimizers.py``,
``test_nsteps.py``, ``test_optimize_stepwise.py``, ``test_restart.py``,
``test_replay.py`` and ``test_optimizer_restart.py``. What differs, and why:

- ``test_optimizer_restart``: ``alpha=70`` (a BFGS Hessian) is not an argument of
  BOOptimizer; ``append_trajectory=True`` as for BFGS, since a resumed BOOptimizer
  keeps its trajectory; the trajectory holds one frame per configuration computed, as
  BFGS's holds one per step.
- ``test_replay``: the replayed frames are observations of the GP
  (:meth:`BOOptimizer.replay_trajectory`), so the second run must also need fewer
  calls than the first needed to get there, which ASE does not ask.
"""

import shutil
from math import sqrt
from os.path import getsize
from pathlib import Path

import numpy as np
import pytest
from ase import Atom, Atoms
from ase.build import bulk
from ase.calculators.calculator import compare_atoms
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter
from ase.io import read
from ase.io.trajectory import Trajectory
from ase.optimize import RestartError

from asebo import BOOptimizer
from calculators import CountingCalculator

optcls = BOOptimizer


# ---- test_optimizers.py ---------------------------------------------------------------
@pytest.fixture(name="ref_atoms")
def fixture_ref_atoms():
    ref_atoms = bulk("Au")
    ref_atoms.calc = EMT()
    ref_atoms.get_potential_energy()
    return ref_atoms


@pytest.fixture(name="atoms")
def fixture_atoms(ref_atoms):
    atoms = ref_atoms * (2, 2, 2)
    floor = 0.45

    atoms.calc = EMT()
    atoms.rattle(stdev=0.1, seed=7)
    e_unopt = atoms.get_potential_energy()
    assert e_unopt > floor
    return atoms


def test_optimize(atoms, ref_atoms):
    """Test if forces can be converged using the optimizer."""
    fmax = 0.01
    with optcls(atoms, logfile=None) as opt:
        is_converged = opt.run(fmax=fmax)
    assert is_converged  # check if opt.run() returns True when converged

    forces = atoms.get_forces()
    final_fmax = max((forces**2).sum(axis=1) ** 0.5)
    ref_energy = ref_atoms.get_potential_energy()
    e_opt = atoms.get_potential_energy() * len(ref_atoms) / len(atoms)
    e_err = abs(e_opt - ref_energy)

    assert e_err < 1.75e-5  # (This tolerance is arbitrary)

    assert final_fmax < fmax
    assert opt.converged()
    assert opt.converged(forces=forces)
    with pytest.warns(FutureWarning):
        assert opt.converged(gradient=-forces.ravel())


def test_unconverged(atoms):
    """Test if things work properly when forces are not converged."""
    fmax = 1e-9  # small value to not get converged
    with optcls(atoms, logfile=None) as opt:
        opt.run(fmax=fmax, steps=1)  # only one step to not get converged
    gradient = opt.optimizable.get_gradient()
    assert not opt.gradient_converged(gradient)
    assert not opt.converged()
    assert not opt.converged(forces=-gradient.reshape(-1, 3))
    assert opt.todict()["fmax"] == 1e-9


def test_run_twice(atoms):
    """Test if `steps` increments `max_steps` when `run` is called twice."""
    fmax = 1e-9  # small value to not get converged
    steps = 5
    with optcls(atoms, logfile=None) as opt:
        opt.run(fmax=fmax, steps=steps)
        opt.run(fmax=fmax, steps=steps)
    assert opt.nsteps == 2 * steps
    assert opt.max_steps == 2 * steps


def test_path(tmp_path, atoms, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fmax = 0.01
    traj, log = Path("trajectory.traj"), Path("relax.log")
    with optcls(atoms, logfile=log, trajectory=traj) as opt:
        is_converged = opt.run(fmax=fmax)
    assert is_converged  # check if opt.run() returns True when converged


# ---- test_nsteps.py -------------------------------------------------------------------
@pytest.fixture()
def opt():
    atoms = bulk("Au", cubic=True)
    atoms.rattle(stdev=0.12345, seed=42)
    atoms.calc = EMT()
    with optcls(atoms, logfile=None) as opt:
        yield opt


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_nsteps(opt, steps):
    """For opt.irun(steps=n), the number of iterations should be n + 1,
    including 0 and n."""
    irun = opt.irun(fmax=0, steps=steps)

    for _ in range(steps + 1):
        next(irun)

    with pytest.raises(StopIteration):
        next(irun)


# ---- test_optimize_stepwise.py --------------------------------------------------------
@pytest.fixture()
def atoms0():
    atoms = bulk("Au", cubic=True)
    atoms.rattle(stdev=0.15, seed=3)
    return atoms


@pytest.fixture()
def stepwise_atoms(atoms0):
    atoms = atoms0.copy()
    atoms.calc = EMT()
    return atoms


def test_irun_start(atoms0, stepwise_atoms):
    opt = optcls(stepwise_atoms, logfile=None)
    irun = opt.irun(fmax=0.0)
    next(irun)  # Initially it yields without yet having performed a step:
    assert not compare_atoms(atoms0, stepwise_atoms)
    next(irun)  # Now it must have performed a step:
    assert compare_atoms(atoms0, stepwise_atoms) == ["positions"]


def test_attach_trajectory(tmp_path, atoms0, stepwise_atoms):
    trajfile = tmp_path / "tmp.traj"
    n_yields = 3
    with Trajectory(trajfile, "w") as traj:
        opt = optcls(stepwise_atoms, trajectory=traj, logfile=None)
        irun = opt.irun(fmax=0.0)

        for _ in range(n_yields):
            next(irun)

    with Trajectory(tmp_path / "tmp.traj") as traj:
        images = list(traj)

    # The number of images must be equal to the number of yielding.
    assert len(images) == n_yields

    assert not compare_atoms(atoms0, images[0])
    assert compare_atoms(atoms0, images[-1]) == ["positions"]


# ---- test_restart.py ------------------------------------------------------------------
def test_path_restart(tmp_path, monkeypatch) -> None:
    """Test if the `Path` object can be passed for `restart`."""
    monkeypatch.chdir(tmp_path)
    atoms = bulk("Cu")
    atoms.calc = EMT()
    restart = Path("restart.json")
    with optcls(atoms, trajectory="opt.traj", restart=restart, logfile=None) as dyn:
        dyn.run()
        assert dyn.todict()["restart"] == "restart.json"


def test_none_restart(tmp_path, monkeypatch) -> None:
    """Test if `None` can be passed for `restart`."""
    monkeypatch.chdir(tmp_path)
    atoms = bulk("Cu")
    atoms.calc = EMT()
    with optcls(atoms, trajectory="opt.traj", restart=None, logfile=None) as dyn:
        dyn.run()
        assert dyn.todict()["restart"] is None


def test_bad_restart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fname = "tmp.dat"

    with open(fname, "w") as fd:
        fd.write("hello world\n")

    with pytest.raises(RestartError, match="Could not decode"):
        optcls(Atoms(), restart=fname)


# ---- test_replay.py -------------------------------------------------------------------
def test_replay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Distance between Cu atoms on a (100) surface:
    d = 3.6 / sqrt(2)
    a = Atoms("Cu", positions=[(0, 0, 0)], cell=(d, d, 1.0), pbc=(True, True, False))
    a *= (2, 2, 1)  # 2x2 (100) surface-cell

    # Approximate height of Ag atom on Cu(100) surfece:
    h0 = 2.0
    a += Atom("Ag", (d / 2, d / 2, h0))

    constraint = FixAtoms(range(len(a) - 1))
    a.calc = CountingCalculator(EMT())
    a.set_constraint(constraint)

    with optcls(a, trajectory="AgCu1.traj", logfile="AgCu1.log") as dyn1:
        dyn1.run(fmax=0.1)
    first_calls = a.calc.ncalls

    a = read("AgCu1.traj")
    a.calc = CountingCalculator(EMT())

    with optcls(a, trajectory="AgCu2.traj", logfile="AgCu2.log") as dyn2:
        dyn2.replay_trajectory("AgCu1.traj")
        assert dyn2.run(fmax=0.01)
    assert len(dyn2.observations) == first_calls + a.calc.ncalls
    # the replayed frames cost nothing: the second run makes no call at the last frame
    assert a.calc.ncalls < first_calls + 3


# ---- test_optimizer_restart.py --------------------------------------------------------
def params():
    run_params = dict(fmax=0.005)
    opt_params = {"append_trajectory": True, "logfile": None}
    return run_params, opt_params


def opt_filter_atoms(trajectory, restart, opt_params):
    atoms = bulk("Au")
    atoms *= 2
    atoms.rattle(stdev=0.005, seed=1)

    # if restarting, we take atoms from traj
    if Path(trajectory).is_file():
        with Trajectory(trajectory, "r") as traj:
            atoms = traj[-1]

    atoms.calc = EMT()

    opt_relax = optcls(
        FrechetCellFilter(atoms, exp_cell_factor=1.0),
        trajectory=trajectory,
        restart=restart,
        **opt_params,
    )

    return opt_relax


def fragile_optimizer(trajectory, restart, run_kwargs, opt_params):
    break_now = 2

    with opt_filter_atoms(
        trajectory=trajectory, restart=restart, opt_params=opt_params
    ) as fragile_init:
        for idx, _ in enumerate(fragile_init.irun(**run_kwargs)):
            if idx == break_now:
                break
        else:
            raise RuntimeError("Fragile Optimizer did not break. Check if nsteps is to large.")

    assert fragile_init.nsteps == break_now
    assert Path(restart).is_file() and Path(trajectory).is_file()
    assert all(size != 0 for size in [getsize(restart), getsize(trajectory)])

    if not opt_params.get("append_trajectory", False):
        shutil.copy(trajectory, trajectory + ".orig")

    with opt_filter_atoms(
        trajectory=trajectory, restart=restart, opt_params=opt_params
    ) as fragile_restart:
        fragile_restart.run(**run_kwargs)

    return fragile_init, fragile_restart


def test_optimizers_restart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    restart_filename = f"restart_{optcls.__name__}.dat"
    trajectory_filename = f"{optcls.__name__}.traj"
    run_kwargs, opt_params = params()

    # single run
    with opt_filter_atoms(
        trajectory="single_" + trajectory_filename,
        restart="single_" + restart_filename,
        opt_params=opt_params,
    ) as single:
        single.run(**run_kwargs)

    # fragile restart
    fragile_init, fragile_restart = fragile_optimizer(
        trajectory="fragile_" + trajectory_filename,
        restart="fragile_" + restart_filename,
        run_kwargs=run_kwargs,
        opt_params=opt_params,
    )

    assert single.nsteps == fragile_init.nsteps + fragile_restart.nsteps

    single_traj = read_traj("single_" + trajectory_filename)
    fragile_traj = read_traj("fragile_" + trajectory_filename)
    assert len(single_traj) == len(fragile_traj)

    # last step of init == first step of restart == single run break_now step
    # last step of restart == last step of single run
    for f_traj, s_traj in zip(fragile_traj, single_traj):
        for f, s in zip(f_traj, s_traj):
            assert np.allclose(f_traj[f], s_traj[s])


def read_traj(file: str):
    data = []

    with Trajectory(file, "r") as traj:
        for idx, atoms in enumerate(traj):
            pos = atoms.get_positions()
            forces = atoms.calc.results["forces"]
            stress = atoms.calc.results["stress"]
            energy = atoms.calc.results["energy"]

            fmax = sqrt((forces**2).sum(axis=1).max())
            smax = abs(stress).max()

            tmp = {
                "step": idx,
                "energy": energy,
                "position": pos,
                "forces": forces,
                "fmax": fmax,
                "smax": smax,
            }
            data.append(tmp)

    return data
