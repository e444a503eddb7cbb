"""BOOptimizer with GPAW under ``mpiexec -n 2``: every rank takes the serial run's steps.

Rank 0 fits the GP and proposes each step, then broadcasts it (``ase.parallel.world``,
which is GPAW's communicator once GPAW is imported); only rank 0 writes the logfile,
trajectory and restart file. The test needs ``mpiexec`` and a GPAW built with MPI and
ScaLAPACK, as ``scripts/test.sh`` builds it (``scripts/gpaw-siteconfig.py``); without
them it is skipped.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from ase.io.jsonio import decode

pytest.importorskip("gpaw")
pytest.importorskip("gpaw_data")

STEPS = 5
# the launcher of the MPI that GPAW was built with: Debian's mpiexec may be Open MPI's
MPIEXEC = shutil.which("mpiexec.mpich") or shutil.which("mpiexec")

SCRIPT = """
import sys
import numpy as np
from gpaw.mpi import world  # GPAW first: ASE's world is then GPAW's communicator
from ase.build import molecule
from asebo import BOOptimizer
from calculators import get_calculator

prefix = sys.argv[1]
atoms = molecule("H2O")
atoms.rattle(stdev=0.05, seed=1)
atoms.calc = get_calculator("gpaw", h=0.25, vacuum=3.0)
# the constant prior: with the Lindh prior this start passes, at step 3, a proposal
# whose outcome turns on the last digits of the energies, which the domain
# decomposition changes, and the serial and parallel paths part after it
optimizer = BOOptimizer(atoms, logfile=prefix + ".log", trajectory=prefix + ".traj",
                        restart=prefix + ".json", prior="max")
positions = []
optimizer.attach(lambda: positions.append(atoms.get_positions().copy()))
optimizer.run(fmax=0.01, steps={steps})
np.save(f"{{prefix}}-rank{{world.rank}}-of-{{world.size}}.npy", np.array(positions))
"""


def gpaw_has_mpi():
    """Whether GPAW was built with MPI and with ScaLAPACK, which its parallel SCF needs."""
    import _gpaw

    return hasattr(_gpaw, "Communicator") and hasattr(_gpaw, "new_blacs_context")


pytestmark = [
    pytest.mark.gpaw,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on the PATH"),
    pytest.mark.skipif(
        not gpaw_has_mpi(),
        reason="GPAW was built without MPI and ScaLAPACK (see scripts/gpaw-siteconfig.py)",
    ),
]


def run_script(tmp_path, prefix, ranks):
    script = tmp_path / "relax.py"
    script.write_text(SCRIPT.format(steps=STEPS))
    command = [sys.executable, str(script), str(tmp_path / prefix)]
    if ranks > 1:
        # GPAW runs MPI-parallel as `gpaw python` (its MPI-enabled interpreter)
        command = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "gpaw", "python", *command[1:]]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [np.load(tmp_path / f"{prefix}-rank{rank}-of-{ranks}.npy") for rank in range(ranks)]


def test_two_ranks_take_the_serial_steps_and_rank_0_alone_writes(tmp_path):
    (serial,) = run_script(tmp_path, "serial", 1)
    rank0, rank1 = run_script(tmp_path, "parallel", 2)

    assert len(serial) == STEPS + 1  # the observer also sees the start
    # broadcast: bit for bit the same positions on both ranks
    np.testing.assert_array_equal(rank0, rank1)
    # GPAW's domain decomposition changes the last digits of the energies only
    np.testing.assert_allclose(rank0, serial, atol=1e-6)

    # one writer: the files of the parallel run are those of a serial run, not doubled
    log_lines = {
        prefix: (tmp_path / f"{prefix}.log").read_text().splitlines()
        for prefix in ("serial", "parallel")
    }
    assert len(log_lines["parallel"]) == len(log_lines["serial"])
    energies = {
        prefix: decode((tmp_path / f"{prefix}.json").read_text())["energies"]
        for prefix in ("serial", "parallel")
    }
    np.testing.assert_allclose(energies["parallel"], energies["serial"], atol=1e-6)
