"""The optimizer's own threads: chosen, held within its work alone, and given back."""

import contextlib
import sys
import types

import numpy as np
import pytest
import torch
from ase.build import molecule
from ase.calculators.emt import EMT
from ase.cluster import Octahedron
from ase.io import Trajectory
from threadpoolctl import threadpool_info, threadpool_limits

from asebo import BOOptimizer
from asebo.cli import main
from asebo.model.prior_calculators import guess_again_on_failure
from asebo.threads import (
    limited_library_threads,
    limited_threads,
    optimizer_threads,
    thread_pools,
)
from calculators import get_calculator


def fixed_libraries():
    """The BLAS and OpenMP libraries loaded whose thread count cannot be set (a
    single-threaded build, such as the OpenBLAS some wheels bundle)."""
    with threadpool_limits(limits=1):
        one = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}
    with threadpool_limits(limits=2):
        two = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}
    return {path for path, count in two.items() if count == one.get(path)}


def threads_seen():
    """PyTorch's threads and those of every BLAS and OpenMP library loaded whose
    thread count can be set."""
    fixed = fixed_libraries()
    return torch.get_num_threads(), {
        lib["filepath"]: lib["num_threads"]
        for lib in threadpool_info()
        if lib["filepath"] not in fixed
    }


def counts(seen):
    """The distinct thread counts of :func:`threads_seen`."""
    torch_threads, libraries = seen
    return {torch_threads, *libraries.values()}


@contextlib.contextmanager
def caller_threads(count):
    """The caller's own settings: ``count`` threads everywhere, set back afterwards."""
    before = torch.get_num_threads()
    with threadpool_limits(limits=count):
        torch.set_num_threads(count)
        try:
            yield
        finally:
            torch.set_num_threads(before)


class ThreadsOfEMT(EMT):
    """EMT that records the threads it runs with at each calculation."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def calculate(self, *args, **kwargs):
        self.seen.append(threads_seen())
        super().calculate(*args, **kwargs)


class ThreadsOfTheFit(BOOptimizer):
    """BOOptimizer that records the threads each fit of its model runs with: every
    step, check at convergence and Hessian reads the engine's fitted model."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fit_threads = []
        fitted = self.engine.fitted

        def recorded(observations):
            self.fit_threads.append(threads_seen())
            return fitted(observations)

        self.engine.fitted = recorded


def copper_cluster():
    atoms = Octahedron("Cu", 2)  # 6 atoms
    atoms.rattle(0.1, seed=1)
    atoms.calc = ThreadsOfEMT()
    return atoms


def test_limited_threads_holds_every_library_and_gives_the_callers_back():
    with caller_threads(1):
        before = threads_seen()
        with limited_threads(2):
            assert counts(threads_seen()) == {2}
        assert threads_seen() == before
        with pytest.raises(RuntimeError), limited_threads(2):
            raise RuntimeError("the block failed")
        assert threads_seen() == before


def test_the_optimizer_fits_with_its_threads_and_the_calculator_keeps_the_callers(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    atoms = copper_cluster()
    with caller_threads(2):
        before = threads_seen()
        opt = ThreadsOfTheFit(atoms, logfile=None)
        assert opt.threads == 1
        assert opt.run(fmax=0.05, steps=30)
        opt.vibrations()
        opt.hessian()
        assert threads_seen() == before  # the caller's settings, as they were
    assert len(opt.fit_threads) > opt.nsteps  # the steps, the checks, the Hessian
    assert all(counts(seen) == {1} for seen in opt.fit_threads)
    assert all(counts(seen) == {2} for seen in atoms.calc.seen)
    assert len(atoms.calc.seen) == opt.nsteps + 1


def test_threads_given_to_the_optimizer_are_those_of_its_fits(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    atoms = copper_cluster()
    with caller_threads(1):
        opt = ThreadsOfTheFit(atoms, logfile=None, threads=2)
        opt.run(fmax=0.05, steps=3)
    assert all(counts(seen) == {2} for seen in opt.fit_threads)
    assert all(counts(seen) == {1} for seen in atoms.calc.seen)


@pytest.mark.parametrize(
    "threads, environment, chosen",
    [
        (None, None, 1),
        (None, "3", 3),
        (None, "4,2", 4),
        (None, "", 1),
        (None, "0", 1),
        (None, "many", 1),
        (2, "3", 2),
        (np.int64(2), None, 2),
    ],
)
def test_the_threads_chosen(threads, environment, chosen):
    environ = {} if environment is None else {"OMP_NUM_THREADS": environment}
    assert optimizer_threads(threads, environ) == chosen


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_threads_that_cannot_be_are_refused_before_any_call(threads):
    atoms = copper_cluster()
    with pytest.raises(ValueError, match="threads must be a whole number >= 1"):
        BOOptimizer(atoms, logfile=None, threads=threads)
    assert atoms.calc.seen == []


def test_the_threads_option_reaches_the_optimizer(tmp_path, capsys):
    path = tmp_path / "cu.xyz"
    copper_cluster().write(path)
    trajectory = tmp_path / "bo.traj"
    argv = ["optimize", str(path), "--calc", "emt", "--logfile", str(tmp_path / "log")]
    assert main([*argv, "--threads", "2", "--trajectory", str(trajectory), "--steps", "2"]) in (
        0,
        1,
    )
    with Trajectory(trajectory) as frames:
        assert frames.description["threads"] == 2
    with pytest.raises(SystemExit, match="--threads must be 1 or more, got 0"):
        main([*argv, "--threads", "0", "--force"])


def tblite_recording_threads():
    """tblite's calculator, held to its threads as the GFN-xTB presets are, recording
    the OpenMP threads each of its calculations runs with."""
    tblite_ase = pytest.importorskip("tblite.ase")

    class Recording(tblite_ase.TBLite):
        seen = []

        def calculate(self, *args, **kwargs):
            self.seen.append(
                {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "openmp"}
            )
            super().calculate(*args, **kwargs)

    return guess_again_on_failure(Recording)


@pytest.mark.parametrize(
    "threads, environment, chosen", [(None, None, 1), (None, "2", 2), (2, "1", 2)]
)
def test_the_gfn_xtb_presets_compute_on_the_threads_the_user_gave(
    monkeypatch, threads, environment, chosen
):
    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    calculator = tblite_recording_threads()(method="GFN2-xTB", verbosity=0, threads=threads)
    atoms = molecule("H2O")
    atoms.calc = calculator
    with threadpool_limits(limits=3, user_api="openmp"):
        atoms.get_forces()
        assert {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "openmp"} == {
            3
        }
    assert calculator.seen == [{chosen}]
    assert atoms.get_potential_energy() == pytest.approx(
        get_calculator("gfn2").get_potential_energy(molecule("H2O")), abs=1e-10
    )


def test_the_libraries_are_looked_up_again_only_after_an_import():
    first = thread_pools()
    assert thread_pools() is first
    name = "asebo_test_threads_new_module"
    sys.modules[name] = types.ModuleType(name)
    try:
        assert thread_pools() is not first
    finally:
        del sys.modules[name]


def test_the_kept_lookup_still_limits_and_restores_the_threads():
    fixed = fixed_libraries()
    settable = [lib["filepath"] for lib in threadpool_info() if lib["filepath"] not in fixed]
    if not settable:
        pytest.skip("no BLAS or OpenMP library loaded whose thread count can be set")

    def library_threads():
        return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}

    with threadpool_limits(limits=2):
        assert thread_pools() is thread_pools()
        with limited_library_threads(1):
            assert {library_threads()[path] for path in settable} == {1}
        assert {library_threads()[path] for path in settable} == {2}
