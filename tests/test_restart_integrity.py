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
