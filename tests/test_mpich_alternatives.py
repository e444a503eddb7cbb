"""``scripts/mpich-alternatives.sh``: the plain ``mpiexec``, ``mpirun`` and ``mpicc`` are
MPICH's, for which ``scripts/test.sh`` builds GPAW, where Open MPI came only as a
dependency (Debian 12's ``libscalapack-mpich2.2`` needs ``mpi-default-bin``, Open MPI).

``apt-mark``, ``update-alternatives`` and ``sudo`` are replaced by stand-ins that answer from files
and record what they were asked to set: no system is changed.
"""

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mpich-alternatives.sh"

APT_MARK = """#!/bin/sh
# apt-mark showauto PACKAGE: the package where it was installed automatically
[ "$1" = showauto ] && cat "$STATE/auto"
"""

SUDO = """#!/bin/sh
exec "$@"
"""

UPDATE_ALTERNATIVES = """#!/bin/sh
case "$1" in
    --query) cat "$STATE/$2" ;;
    --quiet) echo "$3 $4" >> "$STATE/set" ;;
    --set) echo "$2 $3" >> "$STATE/set" ;;
esac
"""


def query(name, value, alternatives):
    """``update-alternatives --query name``'s answer."""
    lines = [f"Name: {name}", f"Link: /usr/bin/{name}", "Status: auto", f"Value: {value}", ""]
    for alternative in alternatives:
        lines += [f"Alternative: {alternative}", "Priority: 40", ""]
    return "\n".join(lines)


def run_script(tmp_path, automatic, chosen="openmpi", mpich=True):
    """The alternatives the script sets, as ``'group path'`` lines, and its status."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    stand_ins = {"apt-mark": APT_MARK, "update-alternatives": UPDATE_ALTERNATIVES, "sudo": SUDO}
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (state / "auto").write_text("openmpi-bin\n" if automatic else "")
    for group, command in (("mpirun", "mpirun"), ("mpi", "mpicc")):
        ours = [f"/usr/bin/{command}.mpich"] if mpich else []
        value = f"/usr/bin/{command}.{chosen}"
        (state / group).write_text(query(group, value, [*ours, f"/usr/bin/{command}.openmpi"]))
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state)},
        timeout=60,
    )
    chosen_now = state / "set"
    return done, chosen_now.read_text().splitlines() if chosen_now.exists() else []


def test_open_mpi_pulled_in_as_a_dependency_gives_the_plain_names_to_mpich(tmp_path):
    done, chosen = run_script(tmp_path, automatic=True)
    assert done.returncode == 0, done.stderr
    assert chosen == ["mpirun /usr/bin/mpirun.mpich", "mpi /usr/bin/mpicc.mpich"]


@pytest.mark.parametrize(
    "case",
    [
        {"automatic": False},  # Open MPI installed on purpose: its choice is kept
        {"automatic": True, "chosen": "mpich"},  # MPICH's already
        {"automatic": True, "mpich": False},  # no MPICH to choose
    ],
)
def test_the_alternatives_are_left_alone_otherwise(tmp_path, case):
    done, chosen = run_script(tmp_path, **case)
    assert done.returncode == 0, done.stderr
    assert chosen == []
