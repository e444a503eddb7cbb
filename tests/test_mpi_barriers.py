"""BONEB and BOSaddle under ``mpiexec -n 2``: every rank takes the serial run's steps.

Rank 0 relaxes the band (or walks to the saddle point) on the GP and broadcasts where
to compute next; every rank calls its calculator there, as GPAW's ranks must; only rank
0 writes the log, the trajectory and the restart file, and not before every rank has
read or found no restart file (the calculators here are not parallel: nothing else
holds rank 0 back). The communicator is GPAW's
(``gpaw.mpi.world``), the calculators EMT (Au on Al(100)) and GFN2-xTB (HCN's
transition-state guess), which give every rank the same numbers. Needs ``mpiexec`` and
a GPAW built with MPI, as ``scripts/test.sh`` builds it; without them it is skipped.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ase.io import read

pytest.importorskip("gpaw")
pytest.importorskip("sella")

from test_mpi import MPIEXEC, gpaw_has_mpi  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

BAND = """
import sys
import numpy as np
from gpaw.mpi import world  # GPAW first: ASE's world is then GPAW's communicator
from asebo.benchmarks.neb import au_on_al100, band, idpp_band
from asebo.neb import BONEB

prefix = sys.argv[1]
initial, final, moving = au_on_al100()
neb = band(initial, final, idpp_band(initial, final, moving))
optimizer = BONEB(neb, logfile=prefix + ".log", trajectory=prefix + ".traj",
                  restart=prefix + ".json", comm=world)
converged = optimizer.run(fmax=0.05, steps=30)
assert converged
np.save(f"{prefix}-rank{world.rank}-of-{world.size}.npy",
        np.array([image.positions for image in neb.images]))
"""

SADDLE = """
import sys
import numpy as np
from gpaw.mpi import world
from asebo.benchmarks.ts import guess
from asebo.saddle import BOSaddle
from calculators import get_calculator

prefix = sys.argv[1]
atoms = guess("01_hcn")
atoms.calc = get_calculator("gfn2")
search = BOSaddle(atoms, logfile=prefix + ".log", trajectory=prefix + ".traj",
                  restart=prefix + ".json", comm=world)
positions = []
search.attach(lambda: positions.append(atoms.get_positions().copy()))
assert search.run(fmax=0.05, steps=40)
np.save(f"{prefix}-rank{world.rank}-of-{world.size}.npy", np.array(positions))
"""

pytestmark = [
    pytest.mark.gpaw,
    pytest.mark.slow,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on the PATH"),
    pytest.mark.skipif(not gpaw_has_mpi(), reason="GPAW was built without MPI"),
]


def run_script(tmp_path, source, prefix, ranks):
    script = tmp_path / "barrier.py"
    script.write_text(source)
    command = [sys.executable, str(script), str(tmp_path / prefix)]
    if ranks > 1:
        command = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "gpaw", "python", *command[1:]]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [np.load(tmp_path / f"{prefix}-rank{rank}-of-{ranks}.npy") for rank in range(ranks)]


@pytest.mark.parametrize("source", [BAND, SADDLE], ids=["band", "saddle"])
def test_two_ranks_take_the_serial_steps_and_rank_0_alone_writes(tmp_path, source):
    (serial,) = run_script(tmp_path, source, "serial", 1)
    rank0, rank1 = run_script(tmp_path, source, "parallel", 2)

    np.testing.assert_array_equal(rank0, rank1)  # broadcast: bit for bit
    np.testing.assert_allclose(rank0, serial, atol=1e-8)
    # one writer: the parallel run's log and trajectory are the serial run's, not doubled
    lines = {p: (tmp_path / f"{p}.log").read_text().splitlines() for p in ("serial", "parallel")}
    assert len(lines["parallel"]) == len(lines["serial"])
    frames = {p: read(tmp_path / f"{p}.traj", ":") for p in ("serial", "parallel")}
    assert len(frames["parallel"]) == len(frames["serial"])
