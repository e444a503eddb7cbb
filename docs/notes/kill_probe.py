"""Kill a relaxation with SIGKILL again and again, resume it each time, and compare.

Each run relaxes a rattled Cu19 octahedron with EMT to fmax 0.01 eV/Å, once
uninterrupted and once killed at a random moment shortly after each new calculator
call and resumed from its restart file, until it finishes. Prints, per run, the kills,
the calls against the uninterrupted run's, the calls repeated (a kill between a
call's return and its save) and whether the endpoint is the uninterrupted run's to
the last bit; at the end, the restart files that could not be read after a kill::

    python docs/notes/kill_probe.py 80
"""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RUN = """
import sys
from pathlib import Path
import numpy as np
from ase.calculators.emt import EMT
from ase.cluster import Octahedron
from asebo import BOOptimizer

restart, calls, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])

class LoggedEMT(EMT):
    def calculate(self, atoms=None, properties=("energy",), system_changes=None):
        super().calculate(atoms, properties, system_changes or ["positions"])
        with open(calls, "a") as log:
            log.write(" ".join(f"{x:.12f}" for x in atoms.positions.ravel()) + "\\n")

atoms = Octahedron("Cu", 3)
atoms.rattle(0.1, seed=seed)
atoms.calc = LoggedEMT()
opt = BOOptimizer(atoms, restart=restart, logfile=None)
opt.run(fmax=0.01, steps=200)
np.save(restart + ".final.npy", np.array(opt.observations.positions[opt.observations.best()]))
Path(restart + ".done").write_text("done")
"""


def count(path):
    """The lines of ``path``, 0 where it does not exist."""
    return path.read_text().count("\n") if path.exists() else 0


def killed_run(folder, seed, rng, script):
    """Run ``seed`` killed and resumed until it finishes; its kills and an unreadable
    restart file count."""
    restart, calls = folder / f"killed{seed}.json", folder / f"killed{seed}.calls"
    kills = unreadable = 0
    while not Path(f"{restart}.done").exists():
        before = count(calls)
        process = subprocess.Popen([sys.executable, script, str(restart), str(calls), str(seed)])
        while process.poll() is None and count(calls) == before:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.4))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
        try:
            if restart.exists():
                json.loads(restart.read_text())
        except ValueError:
            unreadable += 1
    return kills, unreadable


def main(wanted):
    """Runs until ``wanted`` kills; one line per run and a summary."""
    rng = random.Random(1)
    folder = Path(tempfile.mkdtemp())
    script = folder / "run.py"
    script.write_text(RUN)
    kills = unreadable = repeated = differs = seed = 0
    while kills < wanted:
        seed += 1
        reference = folder / f"reference{seed}.json"
        reference_calls = folder / f"reference{seed}.calls"
        subprocess.run(
            [sys.executable, script, str(reference), str(reference_calls), str(seed)], check=True
        )
        run_kills, run_unreadable = killed_run(folder, seed, rng, script)
        lines = (folder / f"killed{seed}.calls").read_text().splitlines()
        same = np.array_equal(
            np.load(f"{reference}.final.npy"), np.load(folder / f"killed{seed}.json.final.npy")
        )
        kills, unreadable = kills + run_kills, unreadable + run_unreadable
        repeated += len(lines) - len(set(lines))
        differs += not same
        print(
            f"run {seed}: kills {run_kills}, calls {len(lines)} (uninterrupted "
            f"{count(reference_calls)}), repeated {len(lines) - len(set(lines))}, "
            f"endpoint identical {same}",
            flush=True,
        )
    print(
        f"kills {kills}, unreadable restart files {unreadable}, runs {seed}, "
        f"repeated calls {repeated}, endpoints that differ {differs}"
    )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 80)
