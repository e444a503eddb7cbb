"""A calculator that logs its calls to a file and kills its process at one of them.

The kill -9 tests run a relaxation in a subprocess with it: the script puts this
folder on ``sys.path`` (:data:`PREAMBLE`) and wraps the calculator class it uses.
"""

import os
import signal
from pathlib import Path

PREAMBLE = f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
"""The first lines of a subprocess script that imports this module."""


def positions_line(atoms):
    """One line of the positions (12 decimals): what tells the calls apart."""
    return " ".join(f"{x:.12f}" for x in atoms.positions.ravel())


def killed_at_call(base, log, kill_at, line=positions_line):
    """A subclass of the calculator class ``base`` that logs and kills.

    Parameters
    ----------
    base : type
        An ASE calculator class.
    log : str
        The file to which every completed calculation appends ``line(atoms)``.
    kill_at : int
        The process is killed (SIGKILL) at the start of the call with this number,
        counting those already in ``log`` from 1; 0 never.
    line : callable
    """

    class KilledAtCall(base):
        def calculate(self, atoms=None, properties=("energy",), system_changes=None):
            calls = Path(log).read_text().count("\n") if os.path.exists(log) else 0
            if calls + 1 == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            super().calculate(atoms, properties, system_changes or ["positions"])
            with open(log, "a") as fd:
                fd.write(line(atoms) + "\n")

    return KilledAtCall
