"""`asebo optimize`: one-line errors for bad input, no overwritten output without --force,
exit statuses, files that cannot be written, Ctrl-C."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ase import Atoms
from ase.io import read

from asebo.cli import main
from asebo.commands import FAILED, INTERRUPTED, REFUSED
from asebo.optimize.observations import check_restart

ROOT = Path(__file__).resolve().parents[1]


def argon_file(tmp_path, count=4, name="argon.xyz"):
    positions = np.array([[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]])[:count]
    path = tmp_path / name
    Atoms(f"Ar{count}" if count else "", positions=positions).write(path)
    return path


def one_line_exit(argv, match, status=REFUSED):
    with pytest.raises(SystemExit, match=match) as raised:
        main(argv)
    message = str(raised.value)
    assert raised.value.code == status
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_file_without_atoms_is_refused(tmp_path):
    path = argon_file(tmp_path, 0)
    one_line_exit(["optimize", str(path), "--calc", "lj"], "no atoms: .*give one atom or more")
    assert not (tmp_path / "argon_relaxed.xyz").exists()


def test_one_atom_converges_with_one_call_and_no_step(tmp_path, capsys):
    path = argon_file(tmp_path, 1)
    assert main(["optimize", str(path), "--calc", "lj"]) == 0
    relaxed = read(tmp_path / "argon_relaxed.xyz")
    assert np.array_equal(relaxed.positions, read(path).positions)


def test_corrupt_restart_is_refused_and_kept(tmp_path):
    path = argon_file(tmp_path)
    restart = tmp_path / "bo.json"
    restart.write_text('{"version": 1, "positions": [[[0')
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", "--restart", str(restart)],
        "restart file .* cannot be read.*left untouched",
    )
    assert restart.read_text() == '{"version": 1, "positions": [[[0'


def test_an_element_the_calculator_does_not_know_is_reported(tmp_path):
    path = tmp_path / "iron.xyz"
    Atoms("Fe2", positions=[[0, 0, 0], [0, 0, 2.3]]).write(path)
    one_line_exit(
        ["optimize", str(path), "--calc", "emt"],
        "the emt calculator failed on .*iron.xyz: NotImplementedError: No EMT-potential for Fe",
        FAILED,
    )


def test_unknown_file_formats_are_reported(tmp_path):
    path = tmp_path / "molecule.unknownformat"
    path.write_text("Ar 0 0 0\n")
    one_line_exit(["optimize", str(path), "--calc", "lj"], "cannot read .*molecule.unknownformat")


def test_an_existing_output_is_kept_unless_forced(tmp_path, capsys):
    path = argon_file(tmp_path)
    output = tmp_path / "argon_relaxed.xyz"
    output.write_text("keep me\n")
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", "--fmax", "0.05"],
        "argon_relaxed.xyz exists: pass --force",
    )
    assert output.read_text() == "keep me\n"
    assert (
        main(
            [
                "optimize",
                str(path),
                "--calc",
                "lj",
                "--fmax",
                "0.05",
                "--force",
                "--logfile",
                str(tmp_path / "log"),
            ]
        )
        == 0
    )
    assert len(read(output)) == 4
    assert "converged after" in capsys.readouterr().out


def counted_calls(monkeypatch):
    """The calculators the command builds from here on, each counting its calls."""
    from calculators import CountingCalculator, get_calculator

    built = []

    def counting(name):
        built.append(CountingCalculator(get_calculator(name)))
        return built[-1]

    monkeypatch.setattr("asebo.commands.optimize.get_calculator", counting)
    return built


def test_the_same_command_goes_on_from_its_restart_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argon_file(tmp_path)
    built = counted_calls(monkeypatch)
    argv = ["optimize", "argon.xyz", "--calc", "lj", "--steps", "2", "--restart", "r.json"]
    argv += ["--logfile", "log", "--hessian", "argon.json"]
    assert main(argv) == 1
    first = check_restart("r.json")
    assert len(first["energies"]) == built[0].ncalls == 3
    statuses = [main(argv) for _ in range(4)]
    assert statuses[-1] == 0 and set(statuses) == {0, 1}
    stored = check_restart("r.json")
    assert len(stored["energies"]) == sum(calculator.ncalls for calculator in built)
    np.testing.assert_array_equal(stored["positions"][:3], first["positions"])
    positions = np.reshape(stored["positions"], (len(stored["energies"]), -1))
    assert len(np.unique(positions.round(8), axis=0)) == len(positions)  # none repeated
    relaxed = read("argon_relaxed.xyz")
    np.testing.assert_allclose(relaxed.positions, stored["positions"][-1], atol=1e-6)


def test_a_resumed_run_keeps_an_output_it_did_not_write(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argon_file(tmp_path)
    argv = ["optimize", "argon.xyz", "--calc", "lj", "--steps", "2", "--restart", "r.json"]
    argv += ["--logfile", "log"]
    assert main(argv) == 1
    computed = saved_observations("r.json")
    other = read("argon.xyz")
    other.positions *= 1.1  # argon, but no configuration of r.json
    other.write("argon_relaxed.xyz")
    kept = Path("argon_relaxed.xyz").read_text()
    one_line_exit(argv, "argon_relaxed.xyz exists: pass --force")
    assert Path("argon_relaxed.xyz").read_text() == kept
    assert saved_observations("r.json") == computed
    Path("argon_relaxed.xyz").write_text("keep me\n")
    one_line_exit(argv, "argon_relaxed.xyz exists: pass --force")
    assert Path("argon_relaxed.xyz").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "options, match",
    [
        (["--fmax", "-1"], "--fmax must be a positive force"),
        (["--fmax", "nan"], "--fmax must be a positive force"),
        (["--steps", "-5"], "--steps must be 0 or more"),
        (["--output", "missing/out.xyz"], "--output .*out.xyz: the folder .* does not exist"),
        (["--logfile", "missing/log"], "--logfile .*: the folder .* does not exist"),
        (["--trajectory", "missing/bo.traj"], "--trajectory .*: the folder .* does not exist"),
        (["--restart", "missing/bo.json"], "--restart .*: the folder .* does not exist"),
    ],
)
def test_options_the_run_could_not_use_are_refused_before_any_call(tmp_path, options, match):
    path = argon_file(tmp_path)
    options = [str(tmp_path / o) if o.startswith("missing") else o for o in options]
    one_line_exit(["optimize", str(path), "--calc", "lj", *options], match)
    assert not (tmp_path / "argon_relaxed.xyz").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argon.xyz"]


def test_observations_warm_start_the_run_and_bad_ones_are_refused(tmp_path, capsys):
    from ase.calculators.lj import LennardJones
    from ase.optimize import BFGS

    path = argon_file(tmp_path)
    atoms = read(path)
    atoms.calc = LennardJones()
    trajectory = tmp_path / "bfgs.traj"
    BFGS(atoms, trajectory=str(trajectory), logfile=None).run(fmax=0.05, steps=3)
    log = tmp_path / "log"
    main(
        [
            "optimize",
            str(path),
            "--calc",
            "lj",
            "--observations",
            str(trajectory),
            "--logfile",
            str(log),
        ]
    )
    assert "warm start: 4 observations taken from 4 frames" in log.read_text()
    assert "converged after" in capsys.readouterr().out

    plain = argon_file(tmp_path, name="plain.xyz")
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", "--force", "--observations", str(plain)],
        "frame 0 has no energy or forces",
    )
    one_line_exit(
        [
            "optimize",
            str(path),
            "--calc",
            "lj",
            "--force",
            "--observations",
            str(tmp_path / "none.traj"),
        ],
        "observations: no file",
    )


def test_hessian_writes_the_model_vibrations_and_is_not_overwritten(tmp_path, capsys):
    from ase.vibrations import VibrationsData

    path = argon_file(tmp_path)
    hessian = tmp_path / "argon_vibrations.json"
    assert main(["optimize", str(path), "--calc", "lj", "--hessian", str(hessian)]) == 0
    out = capsys.readouterr().out
    assert f"model vibrations written to {hessian}" in out
    vibrations = VibrationsData.read(str(hessian))
    found = vibrations.get_frequencies()
    assert len(found) == 12 and np.abs(found[:6]).max() < 1.0  # rigid motions at zero
    assert (found[6:].real > 1.0).all()  # the relaxed cluster is a minimum of the model
    one_line_exit(
        [
            "optimize",
            str(path),
            "--calc",
            "lj",
            "--output",
            str(tmp_path / "o.xyz"),
            "--hessian",
            str(hessian),
        ],
        "argon_vibrations.json exists: pass --force",
    )


def test_hessian_as_an_array_is_the_model_hessian_at_the_end(tmp_path):
    from asebo import BOOptimizer
    from calculators import get_calculator

    path = argon_file(tmp_path)
    hessian, restart = tmp_path / "argon_hessian.npy", tmp_path / "bo.json"
    argv = ["optimize", str(path), "--calc", "lj", "--restart", str(restart)]
    assert main([*argv, "--hessian", str(hessian)]) == 0
    written = np.load(hessian)
    atoms = read(tmp_path / "argon_relaxed.xyz")
    atoms.calc = get_calculator("lj")
    resumed = BOOptimizer(atoms, restart=str(restart), logfile=None)  # the same observations
    assert written.shape == (12, 12)
    np.testing.assert_allclose(written, resumed.hessian(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(written, written.T, atol=1e-8)


def test_hessian_with_another_suffix_is_refused_before_any_call(tmp_path):
    path = argon_file(tmp_path)
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", "--hessian", str(tmp_path / "h.txt")],
        r"--hessian .*h.txt: name it .json \(ASE's VibrationsData\) or .npy",
    )
    assert not (tmp_path / "argon_relaxed.xyz").exists()


def start_asebo(argv, cwd, file_size_limit=None):
    """``asebo argv`` in a fresh interpreter on this checkout, started; no file it
    writes may grow beyond ``file_size_limit`` bytes where given (RLIMIT_FSIZE: the
    operating system refuses the write, as on a full disk). Ctrl-C raises
    KeyboardInterrupt in it, as at a terminal, even where the tests run as a
    background job (which a shell starts with SIGINT ignored)."""
    code = (
        "import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from asebo.cli import main\nsys.exit(main(sys.argv[1:]))"
    )
    if file_size_limit is not None:
        code = (
            f"import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, "
            f"({file_size_limit}, {file_size_limit}))\n{code}"
        )
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, argv)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process, timeout=180):
    """The return code and standard error of ``process`` once it ends."""
    _, stderr = process.communicate(timeout=timeout)
    return process.returncode, stderr


def saved_observations(restart):
    return len(check_restart(str(restart))["energies"])


def test_a_refusal_exits_with_the_usage_status_and_not_converged_with_one(tmp_path):
    path = argon_file(tmp_path)
    (tmp_path / "argon_relaxed.xyz").write_text("keep me\n")
    status, stderr = finished(start_asebo(["optimize", path, "--calc", "lj"], tmp_path))
    assert status == REFUSED == 2
    assert re.fullmatch(r".*argon_relaxed.xyz exists: pass --force.*\n", stderr)
    argv = ["optimize", str(path), "--calc", "lj", "--force", "--steps", "1"]
    assert main([*argv, "--logfile", str(tmp_path / "log")]) == 1


def test_a_restart_file_that_cannot_grow_is_reported_with_the_observations_it_holds(tmp_path):
    path = argon_file(tmp_path)
    sized, restart = tmp_path / "sized.json", tmp_path / "bo.json"
    argv = ["optimize", str(path), "--calc", "lj", "--force"]
    log = ["--logfile", str(tmp_path / "log")]
    assert main([*argv, *log, "--restart", str(sized), "--steps", "2"]) == 1
    # the same run, where no file may reach the size of the third observation's save
    limit = sized.stat().st_size - 1
    status, stderr = finished(start_asebo([*argv, "--restart", restart], tmp_path, limit))
    assert status == FAILED
    found = re.fullmatch(
        r"could not write \S*bo\.json: File too large; the (\d+) observations saved before "
        r"are kept in \S*bo\.json \(run again to resume\)\n",
        stderr,
    )
    assert found, stderr
    assert int(found[1]) == saved_observations(restart) == 2
    assert main([*argv, *log, "--restart", str(restart)]) == 0  # resumed, converged


def test_a_trajectory_that_cannot_grow_is_named(tmp_path):
    path = argon_file(tmp_path)
    sized = tmp_path / "sized.traj"
    argv = ["optimize", str(path), "--calc", "lj", "--force"]
    log = ["--logfile", str(tmp_path / "log")]
    assert main([*argv, *log, "--trajectory", str(sized), "--steps", "0"]) == 1
    limit = sized.stat().st_size - 1  # the first frame cannot be written whole
    argv = [*argv, "--trajectory", tmp_path / "bo.traj"]
    status, stderr = finished(start_asebo(argv, tmp_path, limit))
    assert status == FAILED
    assert re.fullmatch(
        r"could not write \S*bo\.traj: File too large; pass --restart to keep observations\n",
        stderr,
    ), stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_an_output_that_cannot_be_written_says_where_the_relaxed_structure_is(tmp_path):
    path = argon_file(tmp_path)
    output, restart = tmp_path / "full.xyz", tmp_path / "bo.json"
    output.symlink_to("/dev/full")  # every write to it fails: no space left on device
    argv = ["optimize", str(path), "--calc", "lj", "--restart", str(restart)]
    argv += ["--logfile", str(tmp_path / "log")]
    one_line_exit(
        [*argv, "--output", str(output), "--force"],
        r"could not write \S*full.xyz: No space left on device; the relaxed structure is kept "
        r"in \S*bo.json: run again with the same --restart and another --output",
        FAILED,
    )
    computed = saved_observations(restart)
    relaxed = tmp_path / "relaxed.xyz"
    assert main([*argv, "--output", str(relaxed)]) == 0
    assert saved_observations(restart) == computed  # written without a call
    stored = check_restart(str(restart))
    np.testing.assert_allclose(read(relaxed).positions, stored["positions"][-1], atol=1e-6)


UNWRITABLE = Path("/proc/self")
"""A folder in which no one may create a file, the superuser included."""


@pytest.mark.skipif(
    os.access(UNWRITABLE, os.W_OK), reason="/proc/self is writable here: no such folder"
)
@pytest.mark.parametrize(
    "option, name",
    [
        ("--output", "out.xyz"),
        ("--hessian", "vib.json"),
        ("--trajectory", "bo.traj"),
        ("--restart", "bo.json"),
        ("--logfile", "bo.log"),
    ],
)
def test_a_file_in_a_folder_that_cannot_be_written_is_refused_before_any_call(
    tmp_path, option, name
):
    path = argon_file(tmp_path)
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", option, str(UNWRITABLE / name)],
        f"{option} {UNWRITABLE / name}: the folder {UNWRITABLE} cannot be written to",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argon.xyz"]


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="the superuser writes in a folder whatever its mode: the case of /proc/self "
    "checks the refusal for every user",
)
def test_a_folder_without_write_permission_is_refused_before_any_call(tmp_path):
    path = argon_file(tmp_path)
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        one_line_exit(
            ["optimize", str(path), "--calc", "lj", "--output", str(folder / "out.xyz")],
            "--output .*out.xyz: the folder .*read_only cannot be written to",
        )
    finally:
        folder.chmod(0o755)
    assert not (tmp_path / "argon_relaxed.xyz").exists()


def test_an_output_name_of_no_format_ase_writes_is_refused_before_any_call(tmp_path):
    path = argon_file(tmp_path)
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", "--output", str(tmp_path / "out.abc")],
        r"--output \S*out.abc: ASE cannot tell from its name a format it writes",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argon.xyz"]


def test_an_observations_file_that_cannot_be_read_is_refused_in_one_line(tmp_path):
    path = argon_file(tmp_path)
    observations = tmp_path / "cut.traj"
    observations.write_bytes(b"- of Ulm")
    one_line_exit(
        ["optimize", str(path), "--calc", "lj", "--observations", str(observations)],
        r"argon.xyz: observations: cannot read \S*cut.traj.*give a complete ASE trajectory",
    )


def test_the_screen_gives_the_verdict_of_the_log_on_the_model_curvature(tmp_path, capsys):
    path = argon_file(tmp_path)
    log, hessian = tmp_path / "log", tmp_path / "vib.json"
    argv = ["optimize", str(path), "--calc", "lj", "--logfile", str(log)]
    assert main([*argv, "--hessian", str(hessian)]) == 0
    verdicts = re.findall(r"at convergence, (.*)", log.read_text())
    assert len(verdicts) == 1 and "lowest model curvature" in verdicts[0]
    screen = capsys.readouterr().out.strip().splitlines()[-1]
    assert screen.startswith(f"model vibrations written to {hessian}: lowest real frequency")
    assert screen.endswith(f"; at convergence, {verdicts[0]}")
    # not converged: no verdict in the log, and the screen's is the Hessian's
    unconverged = tmp_path / "unconverged.log"
    argv = ["optimize", str(path), "--calc", "lj", "--force", "--steps", "1"]
    assert main([*argv, "--logfile", str(unconverged), "--hessian", str(hessian)]) == 1
    assert "at convergence" not in unconverged.read_text()
    screen = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.search(r"; the Hessian written: lowest model curvature \S+ ± \S+ eV/Å²: ", screen)


def wait_for_step(log, step, process, timeout=120):
    """Wait until the log ``log`` holds the line of ``step``."""
    line = re.compile(rf"^\S+:\s+{step} \d\d:\d\d:\d\d ", re.MULTILINE)
    deadline = time.monotonic() + timeout
    while not (log.exists() and line.search(log.read_text())):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no step logged"
        time.sleep(0.05)


@pytest.mark.parametrize("keep", [True, False])
def test_ctrl_c_stops_the_command_with_one_line_and_status_130(tmp_path, keep):
    path = argon_file(tmp_path)
    log, restart = tmp_path / "log", tmp_path / "bo.json"
    argv = ["optimize", path, "--calc", "lj", "--fmax", "1e-4", "--logfile", log]
    process = start_asebo([*argv, "--restart", restart] if keep else argv, tmp_path)
    wait_for_step(log, 1, process)
    process.send_signal(signal.SIGINT)
    status, stderr = finished(process)
    assert status == INTERRUPTED == 130
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    if keep:
        found = re.fullmatch(
            r"asebo optimize: interrupted at step (\d+); the (\d+) observations are kept in "
            r"\S*bo\.json \(run again to resume\)\n",
            stderr,
        )
        assert found, stderr
        assert int(found[1]) >= 1 and int(found[2]) == saved_observations(restart)
    else:
        assert re.fullmatch(
            r"asebo optimize: interrupted at step \d+; pass --restart to keep observations\n",
            stderr,
        ), stderr


def test_a_preset_with_its_options_is_taken_and_a_misspelt_one_refused(tmp_path, capsys):
    # the commands took a bare name only, where asebo compare takes gpaw:h=0.25
    path = argon_file(tmp_path)
    assert main(["optimize", str(path), "--calc", "LJ:sigma=1.2", "--logfile", "-"]) == 0
    relaxed = read(tmp_path / "argon_relaxed.xyz")
    distances = relaxed.get_all_distances()[np.triu_indices(4, 1)]
    assert distances.min() == pytest.approx(2 ** (1 / 6) * 1.2, abs=0.02)  # LJ's minimum
    capsys.readouterr()
    for command in (["optimize", str(path)], ["saddle", str(path)]):
        with pytest.raises(SystemExit) as raised:
            main([*command, "--calc", "lj:sigmma=1.2"])
        assert raised.value.code == 2
        assert "the lj preset has no option 'sigmma'" in capsys.readouterr().err
    # a value the calculator refuses only once built (GPAW's grid) or computing
    # (tblite's charge) ended in a traceback or in exit 3 after the run had begun
    for calc, words in (
        ("gpaw:h=O.2", "h must be a grid spacing in Å, > 0, got 'O.2'"),
        ("gpaw:mode=xyz", "mode must be one of fd, lcao, pw"),
        ("gfn2:charge=x", "option charge='x' of the gfn2 preset is not a whole number"),
    ):
        with pytest.raises(SystemExit) as raised:
            main(["optimize", str(path), "--calc", calc])
        assert raised.value.code == 2
        assert words in capsys.readouterr().err
