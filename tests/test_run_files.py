"""The files of a run: no two of them one file, and a restart file that keeps its
permissions."""

import os
import re
import stat

import pytest
from ase import Atoms
from ase.calculators.lj import LennardJones

from asebo import BOOptimizer
from asebo.cli import main
from asebo.commands import REFUSED
from asebo.optimize.observations import check_restart
from asebo.optimize.system_checks import check_distinct_files
from calculators import CountingCalculator

POSITIONS = [[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]]


def argon():
    atoms = Atoms("Ar4", positions=POSITIONS)
    atoms.calc = CountingCalculator(LennardJones())
    return atoms


# ---- one function for every driver -----------------------------------------------------
def test_distinct_files_pass_and_what_names_no_file_is_passed_over(tmp_path):
    check_distinct_files(
        restart=tmp_path / "a.json",
        logfile="-",
        trajectory=None,
        observations=[argon()],
        output=tmp_path / "a.xyz",
    )


def test_one_file_under_two_names_is_refused_naming_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.json").write_text("{}")
    os.symlink(tmp_path / "a.json", tmp_path / "link.json")
    os.link(tmp_path / "a.json", tmp_path / "hard.json")
    for other in ("a.json", str(tmp_path / "a.json"), "sub/../a.json", "link.json", "hard.json"):
        match = re.escape(f"restart 'a.json' and logfile '{other}' are the same file")
        with pytest.raises(ValueError, match=match):
            check_distinct_files(restart="a.json", logfile=other, trajectory="t.traj")
    with pytest.raises(ValueError, match="trajectory 't.traj' and output 't.traj'"):
        check_distinct_files(restart="a.json", trajectory="t.traj", output="t.traj")


# ---- BOOptimizer ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("restart", "logfile"),
        ("restart", "trajectory"),
        ("logfile", "trajectory"),
        ("trajectory", "observations"),
    ],
)
def test_an_optimizer_given_one_file_twice_is_refused_before_any_call(tmp_path, first, second):
    restart = str(tmp_path / "bo.json")
    BOOptimizer(argon(), restart=restart, logfile=None).run(fmax=0.01, steps=2)
    saved = (tmp_path / "bo.json").read_text()
    atoms = argon()
    with pytest.raises(ValueError, match=f"^{first} '.*' and {second} '.*' are the same file"):
        BOOptimizer(atoms, **{"logfile": None, first: restart, second: restart})
    assert atoms.calc.ncalls == 0
    assert (tmp_path / "bo.json").read_text() == saved
    assert len(check_restart(restart)["energies"]) == 3


# ---- asebo optimize --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("--output", "--restart"),
        ("--output", "--trajectory"),
        ("--output", "--logfile"),
        ("--restart", "--trajectory"),
        ("--restart", "--hessian"),
        ("--trajectory", "--observations"),
    ],
)
def test_the_command_given_one_file_twice_is_refused_before_any_call(tmp_path, first, second):
    structure = tmp_path / "argon.xyz"
    argon().write(structure)
    names = {"--hessian": "h.json", "--trajectory": "bo.traj", "--observations": "bo.traj"}
    shared = tmp_path / names.get(second, names.get(first, "bo.json"))
    if first == "--trajectory" or second == "--observations":
        atoms = argon()
        atoms.get_forces()
        atoms.write(shared)
    saved = shared.read_bytes() if shared.exists() else None
    argv = ["optimize", str(structure), "--calc", "lj", first, str(shared), second, str(shared)]
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == REFUSED
    both = f"{first} '{shared}' and {second} '{shared}'"
    assert str(raised.value) == f"{both} are the same file: give each its own name"
    assert (shared.read_bytes() if shared.exists() else None) == saved
    assert not (tmp_path / "argon_relaxed.xyz").exists()


# ---- permissions of the restart file ---------------------------------------------------
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664])
def test_the_restart_file_keeps_the_mode_given_to_it(tmp_path, mode):
    restart = str(tmp_path / "bo.json")
    old = os.umask(0o022)
    try:
        BOOptimizer(argon(), restart=restart, logfile=None).run(fmax=0.01, steps=1)
        assert stat.S_IMODE(os.stat(restart).st_mode) == 0o644
        saved = len(check_restart(restart)["energies"])
        os.chmod(restart, mode)
        BOOptimizer(argon(), restart=restart, logfile=None).run(fmax=0.01, steps=2)
    finally:
        os.umask(old)
    assert len(check_restart(restart)["energies"]) > saved
    assert stat.S_IMODE(os.stat(restart).st_mode) == mode
