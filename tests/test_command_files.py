"""The files of `asebo optimize`, `neb`, `saddle`, `ts` and `compare`: inputs that are
only read, a band that goes on after Ctrl-C, output formats that cannot hold the
structure and output names of VASP inputs, files of other runs kept without --force,
and the plots of a campaign checked before it runs."""

import os
from pathlib import Path

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read, write
from ase.io.trajectory import Trajectory

from asebo.cli import main
from asebo.commands import INTERRUPTED, REFUSED

PNG = b"\x89PNG\r\n\x1a\n"
UNWRITABLE = Path("/proc/self")
"""A folder in which no one may create a file, the superuser included."""


def one_line_exit(argv, match, status=REFUSED):
    with pytest.raises(SystemExit, match=match) as raised:
        main(argv)
    assert raised.value.code == status
    assert "\n" not in str(raised.value) and "Traceback" not in str(raised.value)
    return str(raised.value)


def copper(name, distance, third=None):
    """Two (three) copper atoms, written to ``name``."""
    positions = [[0, 0, 0], [0, 0, distance]] + ([] if third is None else [third])
    Atoms(f"Cu{len(positions)}", positions=positions).write(name)


def band_command(*options):
    return ["neb", "initial.traj", "final.traj", "--calc", "emt", "--images", "3", *options]


def other_frames(path, count=17):
    """A trajectory of another molecule: ``count`` frames of methane with energies."""
    from ase.build import molecule

    with Trajectory(path, "w") as trajectory:
        for k in range(count):
            atoms = molecule("CH4")
            atoms.rattle(0.05, seed=k)
            atoms.calc = SinglePointCalculator(atoms, energy=-k, forces=np.zeros((5, 3)))
            trajectory.write(atoms)


# A: inputs are only read


@pytest.fixture
def read_only_inputs(tmp_path, monkeypatch):
    """``inputs/a.xyz`` and ``inputs/b.xyz``, read-only files in a read-only folder, the
    superuser included (``os.access`` answers by the mode bits there); the working
    directory is ``tmp_path``."""
    folder = tmp_path / "inputs"
    folder.mkdir()
    copper(folder / "a.xyz", 2.4)
    copper(folder / "b.xyz", 2.6)
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)
    access = os.access

    def by_mode(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(path).absolute().is_relative_to(folder):
            return False
        return access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", by_mode)
    monkeypatch.chdir(tmp_path)
    yield folder
    folder.chmod(0o755)


@pytest.mark.parametrize(
    "command",
    [
        ["optimize", "inputs/a.xyz", "--steps", "0"],
        ["saddle", "inputs/a.xyz", "--steps", "0"],
        ["neb", "inputs/a.xyz", "inputs/b.xyz", "--steps", "0", "--no-plot"],
        ["ts", "inputs/a.xyz", "inputs/b.xyz", "--steps", "1"],
    ],
)
def test_inputs_in_a_read_only_folder_are_read(read_only_inputs, command):
    if command[0] in ("saddle", "ts"):
        pytest.importorskip("sella")
    argv = [*command, "--calc", "emt", "--output", "out.xyz", "--logfile", "log"]
    assert main(argv) in (0, 1)
    assert read("out.xyz", ":")
    assert sorted(p.name for p in read_only_inputs.iterdir()) == ["a.xyz", "b.xyz"]


# B: the band goes on after Ctrl-C


def test_the_band_goes_on_after_ctrl_c_over_the_band_it_wrote(ends, monkeypatch):
    from asebo.neb import BONEB

    command = band_command("--restart", "band.json", "--steps", "2", "--logfile", "-")
    assert main(command) == 1
    written = (ends / "initial_band.xyz").read_bytes()
    step = BONEB.step

    def step_then_interrupt(self):
        step(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(BONEB, "step", step_then_interrupt)
    assert main(band_command("--restart", "band.json", "--logfile", "-")) == INTERRUPTED
    monkeypatch.setattr(BONEB, "step", step)
    assert (ends / "initial_band.xyz").read_bytes() == written  # the band moved on since
    assert main(command) == 1  # its own band and picture replaced without --force
    assert (ends / "initial_band.xyz").read_bytes() != written
    assert (ends / "initial_band.png").read_bytes().startswith(PNG)


def test_a_band_the_restart_file_never_held_is_kept_when_the_band_goes_on(ends):
    from ase.mep import NEB

    assert main(band_command("--restart", "band.json", "--steps", "1", "--no-plot")) == 1
    images = [read("initial.traj") for _ in range(4)] + [read("final.traj")]
    NEB(images).interpolate()  # between the same endpoints, of no call of band.json
    write("mine.xyz", images)
    kept = Path("mine.xyz").read_bytes()
    options = ("--restart", "band.json", "--steps", "1", "--no-plot", "--output", "mine.xyz")
    one_line_exit(band_command(*options), "mine.xyz exists: pass --force")
    assert Path("mine.xyz").read_bytes() == kept


# C: an output format that cannot hold the structure


@pytest.mark.parametrize("output", ["CONTCAR", "x.vasp", "x.lammps-data", "x.espresso-in"])
def test_an_output_format_that_cannot_hold_the_molecule_is_refused_before_any_call(
    tmp_path, monkeypatch, output
):
    monkeypatch.chdir(tmp_path)
    copper("a.xyz", 2.4)
    argv = ["optimize", "a.xyz", "--calc", "emt", "--restart", "r.json", "--output", output]
    one_line_exit(argv, f"--output {output}: ASE cannot write this structure as ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.xyz"]


@pytest.mark.parametrize(
    "command, output",
    [
        (["saddle", "a.xyz"], "CONTCAR"),
        (["ts", "a.xyz", "b.xyz"], "x.vasp"),
        (["neb", "a.xyz", "b.xyz", "--no-plot"], "band.mp4"),
    ],
)
def test_every_command_refuses_such_an_output_before_any_call(
    tmp_path, monkeypatch, command, output
):
    if command[0] != "neb":
        pytest.importorskip("sella")
    else:  # an animation of the band: ASE writes it with ffmpeg, refused without
        from matplotlib.animation import writers

        if writers.is_available("ffmpeg"):
            pytest.skip("ffmpeg writes the band as a film here")
    monkeypatch.chdir(tmp_path)
    copper("a.xyz", 2.4)
    copper("b.xyz", 2.6)
    argv = [*command, "--calc", "emt", "--restart", "r", "--output", output]
    one_line_exit(argv, f"--output {output}: ASE cannot write this structure as ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.xyz", "b.xyz"]


# D: the output names of VASP inputs


@pytest.fixture
def poscars(endpoints, tmp_path, monkeypatch):
    """``ini/POSCAR`` and ``fin/POSCAR``: the endpoints in VASP's format."""
    monkeypatch.chdir(tmp_path)
    for name, source in (("ini", "initial.traj"), ("fin", "final.traj")):
        (tmp_path / name).mkdir()
        write(tmp_path / name / "POSCAR", read(endpoints / source), format="vasp")
    return tmp_path


def test_a_vasp_input_relaxed_is_written_as_extended_xyz_and_goes_on(poscars):
    argv = ["optimize", "ini/POSCAR", "--calc", "emt", "--steps", "1", "--restart", "r.json"]
    assert main([*argv, "--logfile", "log"]) in (0, 1)
    relaxed = read("ini/POSCAR_relaxed.xyz", format="extxyz")
    assert np.isfinite(relaxed.get_potential_energy())
    assert relaxed.get_forces().shape == (13, 3)
    assert main([*argv, "--logfile", "log"]) in (0, 1)  # its own output replaced
    again = ["optimize", "ini/POSCAR_relaxed.xyz", "--calc", "emt", "--steps", "0"]
    assert main([*again, "--logfile", "log"]) in (0, 1)  # read as extended XYZ


def test_a_band_between_vasp_inputs_takes_its_default_name(poscars):
    argv = ["neb", "ini/POSCAR", "fin/POSCAR", "--calc", "emt", "--images", "1", "--steps", "0"]
    assert main([*argv, "--logfile", "log"]) == 1
    band = read("ini/POSCAR_band.xyz", ":", format="extxyz")
    assert len(band) == 3 and all(image.get_forces().shape == (13, 3) for image in band)
    assert (poscars / "ini" / "POSCAR_band.png").read_bytes().startswith(PNG)


# E: the files of another run are kept


def argon(name="argon.xyz"):
    positions = [[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]]
    Atoms("Ar4", positions=positions).write(name)


@pytest.mark.parametrize("hessian", ["vib.json", "hessian.npy"])
def test_a_hessian_file_of_another_kind_is_kept_when_the_run_goes_on(
    tmp_path, monkeypatch, hessian
):
    monkeypatch.chdir(tmp_path)
    argon()
    argv = ["optimize", "argon.xyz", "--calc", "lj", "--steps", "2", "--restart", "r.json"]
    argv += ["--logfile", "log"]
    assert main([*argv, "--hessian", hessian]) == 1
    assert main([*argv, "--hessian", hessian]) in (0, 1)  # its own Hessian replaced
    Path("notes.json").write_text("my notes\n")
    np.save("other.npy", np.eye(3))
    for other in ("notes.json", "other.npy"):
        kept = Path(other).read_bytes()
        one_line_exit([*argv, "--hessian", other], f"{other} exists: pass --force")
        assert Path(other).read_bytes() == kept


def relaxation():
    argon()
    return ["optimize", "argon.xyz", "--calc", "lj"]


def saddle_search():
    pytest.importorskip("sella")
    copper("a.xyz", 2.4, [0, 2.2, 1.2])
    return ["saddle", "a.xyz", "--calc", "emt"]


def band():
    return band_command("--no-plot")


@pytest.mark.parametrize("command", [relaxation, saddle_search, band])
def test_another_runs_trajectory_is_kept_when_the_run_goes_on(ends, command):
    argv = [*command(), "--steps", "1", "--restart", "r.json", "--logfile", "log"]
    assert main([*argv, "--trajectory", "run.traj"]) == 1
    frames = len(read("run.traj", ":"))
    assert main([*argv, "--trajectory", "run.traj"]) == 1  # its own frames, continued
    assert len(read("run.traj", ":")) > frames
    other_frames("other.traj")
    kept = Path("other.traj").read_bytes()
    one_line_exit([*argv, "--trajectory", "other.traj"], "other.traj exists: pass --force")
    assert Path("other.traj").read_bytes() == kept


def test_another_picture_is_kept_when_the_band_goes_on(ends):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    command = band_command("--restart", "band.json", "--steps", "1", "--logfile", "log")
    assert main(command) == 1
    assert main(command) == 1  # its own band and picture replaced
    figure = Figure()
    FigureCanvasAgg(figure)
    figure.subplots().plot([0, 1], [1, 0])
    figure.savefig("mine.png")
    kept = Path("mine.png").read_bytes()
    one_line_exit([*command, "--plot", "mine.png"], "mine.png exists: pass --force")
    assert Path("mine.png").read_bytes() == kept


# F: the plots of a campaign


@pytest.mark.parametrize(
    "prefix, db, match",
    [
        ("afile/demo", "never.db", "--plot afile/demo: .*afile is a file, not a folder"),
        pytest.param(
            str(UNWRITABLE / "demo"),
            "never.db",
            f"--plot {UNWRITABLE / 'demo'}: the folder {UNWRITABLE} cannot be written to",
            marks=pytest.mark.skipif(os.access(UNWRITABLE, os.W_OK), reason="writable here"),
        ),
        ("demo", "demo_best.png", "'demo_best.png' and --db 'demo_best.png' are the same file"),
    ],
)
def test_a_plot_prefix_that_cannot_be_written_is_refused_before_the_campaign(
    tmp_path, monkeypatch, capsys, prefix, db, match
):
    import re

    monkeypatch.chdir(tmp_path)
    Path("afile").write_text("a file")
    argv = ["compare", "--molecules", "H2O", "--calc", "emt", "--starts", "1", "--db", db]
    assert main([*argv, "--scheduler", "serial", "--no-progress", "--plot", prefix]) == 2
    error = capsys.readouterr().err
    assert re.search(match, error) and "Traceback" not in error
    assert len(error.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
