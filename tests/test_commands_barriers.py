"""`asebo neb` and `asebo saddle` end to end: a short EMT band (Au on Al(100)), a saddle
point from Baker and Chan's HCN guess (GFN2-xTB, three atoms), their exit statuses,
their one-line refusals before any call, and the band's picture."""

from pathlib import Path

import numpy as np
import pytest
from ase.io import read
from ase.mep import NEB
from ase.optimize import BFGS

from asebo.benchmarks._endpoint_audit import imaginary_modes
from asebo.benchmarks.neb import au_on_al100
from asebo.benchmarks.ts import guess
from asebo.cli import main
from asebo.commands import FAILED, INTERRUPTED, REFUSED
from asebo.optimize.observations import check_restart
from calculators import get_calculator

PNG = b"\x89PNG\r\n\x1a\n"


def one_line_exit(argv, match, status=REFUSED):
    with pytest.raises(SystemExit, match=match) as raised:
        main(argv)
    assert raised.value.code == status
    assert "\n" not in str(raised.value)
    return str(raised.value)


def computed(restart):
    """The images computed that ``restart`` holds."""
    return len(check_restart(str(restart))["energies"])


def band_command(*options):
    return ["neb", "initial.traj", "final.traj", "--calc", "emt", "--images", "3", *options]


def test_the_band_reaches_ase_nebs_barrier_and_draws_its_profile(ends, capsys):
    assert main(band_command("--climb", "--restart", "band.json", "--logfile", "band.log")) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    band = read("initial_band.xyz", ":")
    assert len(band) == 5
    energies = np.array([image.get_potential_energy() for image in band])
    assert f"barrier {energies.max() - energies[0]:.4f} eV" in line
    assert line.startswith("converged after") and "written to initial_band.xyz" in line
    assert (ends / "initial_band.png").read_bytes().startswith(PNG)
    images = [read("initial.traj")] + [read("initial.traj") for _ in range(3)]
    images.append(read("final.traj"))
    reference = NEB(images, climb=True, method="improvedtangent")
    reference.interpolate(method="idpp", apply_constraint=False)
    for image in images:
        image.calc = get_calculator("emt")
    assert BFGS(reference, logfile=None).run(fmax=0.05, steps=300)
    barrier = max(image.get_potential_energy() for image in images)
    assert energies.max() - energies[0] == pytest.approx(barrier - energies[0], abs=0.005)
    for image in band:  # every image computed at its place: the calculator's values
        computed = image.copy()
        computed.calc = get_calculator("emt")
        assert computed.get_potential_energy() == pytest.approx(image.get_potential_energy())
        np.testing.assert_allclose(computed.get_forces(), image.get_forces(), atol=1e-6)


def test_the_same_command_goes_on_from_its_restart_file_and_replaces_its_band(ends, capsys):
    command = band_command("--climb", "--restart", "band.json", "--steps", "3", "--logfile", "-")
    assert main(command) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("not converged after 3 steps, 3 calls (")
    assert line.endswith("the same command goes on from band.json")
    calls = computed(ends / "band.json")
    command[command.index("3", command.index("--steps"))] = "100"
    assert main(command) == 0  # the band and picture it wrote are replaced without --force
    total = computed(ends / "band.json")
    assert main(command) == 0
    assert computed(ends / "band.json") == total > calls
    assert "converged after 0 steps" in capsys.readouterr().out.strip().splitlines()[-1]


def test_no_picture_is_written_with_no_plot(ends):
    assert main(band_command("--steps", "0", "--no-plot", "--logfile", "-")) == 1
    assert read("initial_band.xyz", ":")
    assert not (ends / "initial_band.png").exists()


def other_atoms(folder):
    atoms = read(folder / "final.traj")
    del atoms[-1]
    atoms.write(folder / "final.traj")


def other_cell(folder):
    atoms = read(folder / "final.traj")
    atoms.set_cell(atoms.cell * 1.01)
    atoms.write(folder / "final.traj")


def initial_again(folder):
    read(folder / "initial.traj").write(folder / "final.traj")


@pytest.mark.parametrize(
    "options, prepare, match",
    [
        ((), other_atoms, "final.traj holds other atoms.*give the same atoms in the same order"),
        ((), other_cell, r"other atoms, boundary conditions or cell .*a cell vector component"),
        ((), initial_again, "initial.traj and final.traj are one configuration"),
        (("--images", "0"), None, "--images must be 1 or more"),
        (("--fmax", "-1"), None, "--fmax must be a positive force"),
        (("--plot", "band.txt"), None, "--plot band.txt: name it .png, .pdf, .svg"),
        (("--output", "band.vasp"), None, "its format holds one structure"),
        (("--output", "band.xyz", "--plot", "band.xyz"), None, "are the same file"),
        (("--trajectory", "nowhere/band.traj"), None, "nowhere.* does not exist; create it"),
    ],
)
def test_what_the_band_cannot_use_is_refused_before_any_call(ends, options, prepare, match):
    if prepare is not None:
        prepare(ends)
    one_line_exit(band_command(*options), match)
    assert not list(ends.glob("initial_band*"))


INPUTS = {
    "optimize": (["optimize", "a.xyz"], "FILE"),
    "saddle": (["saddle", "a.xyz"], "GUESS"),
    "neb": (["neb", "b.xyz", "a.xyz"], "FINAL"),
    "ts": (["ts", "a.xyz", "b.xyz"], "INITIAL"),
}


@pytest.mark.parametrize(
    "command, name, option",
    [
        (*INPUTS[kind], option)
        for kind in INPUTS
        for option in ("--output", "--trajectory", "--logfile")
        if (kind, option) != ("ts", "--trajectory")  # asebo ts writes no trajectory
    ],
)
def test_an_input_named_as_a_file_the_run_writes_is_refused_and_kept(
    tmp_path, monkeypatch, command, name, option
):
    from ase import Atoms

    monkeypatch.chdir(tmp_path)
    Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.4]]).write("a.xyz")
    Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.6]]).write("b.xyz")
    written = {path: path.read_bytes() for path in tmp_path.iterdir()}
    one_line_exit(
        [*command, "--calc", "emt", option, "a.xyz"],
        f"{name} 'a.xyz' and {option} 'a.xyz' are the same file",
    )
    assert {path: path.read_bytes() for path in tmp_path.iterdir()} == written


def test_an_existing_band_or_picture_is_kept_without_force(ends):
    (ends / "initial_band.png").write_text("mine")
    one_line_exit(band_command(), "initial_band.png exists: pass --force")
    assert (ends / "initial_band.png").read_text() == "mine"


def test_ctrl_c_stops_the_band_with_one_line_and_what_the_restart_file_keeps(
    ends, monkeypatch, capsys
):
    from asebo.neb import BONEB

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(BONEB, "step", interrupted)
    assert main(band_command("--restart", "band.json", "--logfile", "-")) == INTERRUPTED
    assert capsys.readouterr().err.strip() == (
        "asebo neb: interrupted after 0 calls; the 2 images computed are kept in band.json "
        "(run again to resume)"
    )


def test_a_calculator_that_fails_on_the_band_stops_it_with_one_line(tmp_path, monkeypatch):
    from ase import Atoms

    monkeypatch.chdir(tmp_path)
    Atoms("Fe2", positions=[[0, 0, 0], [0, 0, 2.3]]).write("initial.xyz")
    Atoms("Fe2", positions=[[0, 0, 0], [0, 0, 2.6]]).write("final.xyz")
    one_line_exit(
        ["neb", "initial.xyz", "final.xyz", "--calc", "emt", "--logfile", "-"],
        "the emt calculator failed on the band: NotImplementedError: No EMT-potential for Fe",
        FAILED,
    )


@pytest.fixture
def hcn_guess(tmp_path, monkeypatch):
    pytest.importorskip("sella")
    pytest.importorskip("tblite")
    monkeypatch.chdir(tmp_path)
    guess("01_hcn").write("guess.xyz")
    return tmp_path


def test_the_saddle_point_has_the_imaginary_frequency_it_prints(hcn_guess, capsys):
    assert main(["saddle", "guess.xyz", "--logfile", "-"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("converged after") and "a first-order saddle point" in line
    saddle = read("guess_saddle.xyz")
    assert np.sqrt((saddle.get_forces() ** 2).sum(axis=1)).max() < 0.05
    modes = imaginary_modes(saddle, get_calculator("gfn2"))
    assert len(modes) == 1
    printed = float(line.split("imaginary frequency ")[1].split("i cm")[0])
    assert printed == pytest.approx(modes[0], rel=0.05)


def test_an_unfinished_saddle_search_goes_on_from_its_restart_file(hcn_guess, capsys):
    command = ["saddle", "guess.xyz", "--restart", "s.json", "--logfile", "-", "--steps", "2"]
    assert main(command) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("not converged after 2 steps, 3 calls (its steps ran out)")
    assert main([*command[:-1], "50"]) == 0
    assert "converged after" in capsys.readouterr().out.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "build, match",
    [
        ("atoms on top of one another", "atoms 0 and 1 are 0.200 Å apart, closer than"),
        ("one atom", "BOSaddle needs two atoms or more"),
        ("existing output", "guess_saddle.xyz exists: pass --force"),
    ],
)
def test_what_the_saddle_search_cannot_take_is_refused_before_any_call(
    tmp_path, monkeypatch, build, match
):
    from ase import Atoms

    pytest.importorskip("sella")
    monkeypatch.chdir(tmp_path)
    atoms = Atoms("CuCu", positions=[[0, 0, 0], [0, 0, 2.3]])
    if build == "atoms on top of one another":
        atoms.positions[1] = [0, 0, 0.2]
    if build == "one atom":
        atoms = atoms[:1]
    if build == "existing output":
        (tmp_path / "guess_saddle.xyz").write_text("mine")
    atoms.write("guess.xyz")
    one_line_exit(["saddle", "guess.xyz", "--calc", "emt", "--logfile", "-"], match)
    if build == "existing output":
        assert (tmp_path / "guess_saddle.xyz").read_text() == "mine"
    else:
        assert not (tmp_path / "guess_saddle.xyz").exists()


def test_a_surface_hops_saddle_point_from_a_guess_file(tmp_path, monkeypatch, capsys):
    from asebo.benchmarks.hop_saddles import FLAT, HOPS, free_curvatures, hop_guess

    pytest.importorskip("sella")
    monkeypatch.chdir(tmp_path)
    initial, final = HOPS["pt_pt111"]()
    hop_guess(initial, final).write("hop.traj")  # FixAtoms kept
    assert main(["saddle", "hop.traj", "--calc", "emt", "--logfile", "-"]) == 0
    assert "a first-order saddle point" in capsys.readouterr().out.strip().splitlines()[-1]
    saddle = read("hop_saddle.xyz")
    saddle.set_constraint(read("hop.traj").constraints)
    assert (free_curvatures(saddle, get_calculator("emt")) < FLAT).sum() == 1


def test_a_result_file_leaves_out_what_its_format_cannot_store(tmp_path):
    import warnings

    from asebo.commands._formats import write_structures

    initial, final, _ = au_on_al100()  # built by add_adsorbate: a dict in info
    initial.info["name"] = "hop"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ASE warns where it skips an entry
        write_structures(tmp_path / "band.xyz", [initial, final])
        write_structures(tmp_path / "one.xyz", initial)
    band = read(tmp_path / "band.xyz", ":")
    assert len(band) == 2 and band[0].info["name"] == "hop"
    assert "adsorbate_info" not in band[0].info
    assert read(tmp_path / "one.xyz").info["name"] == "hop"
    assert "adsorbate_info" in initial.info  # the atoms keep theirs


def test_a_prior_calculator_that_fails_is_named_as_the_prior_not_the_target(tmp_path, monkeypatch):
    pytest.importorskip("sella")
    from ase import Atoms

    monkeypatch.chdir(tmp_path)
    Atoms("Fe3", positions=[[0, 0, 0], [2.4, 0, 0], [1.2, 1.9, 0]]).write("fe3.xyz")
    line = one_line_exit(
        ["saddle", "fe3.xyz", "--calc", "lj", "--prior", "emt", "--logfile", "-"],
        "^the prior calculator failed on fe3.xyz: PriorCalculationError: .*No EMT-potential for Fe",
        FAILED,
    )
    assert "the lj calculator" not in line


@pytest.mark.parametrize("kind", ["optimize", "saddle", "neb"])
def test_an_existing_trajectory_is_kept_without_force_unless_the_run_wrote_it(
    tmp_path, monkeypatch, kind
):
    from ase import Atoms

    monkeypatch.chdir(tmp_path)
    Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.4]]).write("a.xyz")
    Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.6]]).write("b.xyz")
    Path("mine.traj").write_text("the frames of another run")
    command = {
        "optimize": ["optimize", "a.xyz"],
        "saddle": ["saddle", "a.xyz"],
        "neb": ["neb", "a.xyz", "b.xyz"],
    }[kind] + ["--calc", "emt", "--trajectory", "mine.traj", "--steps", "0"]
    one_line_exit(command, "mine.traj exists: pass --force to overwrite it, or --trajectory")
    assert Path("mine.traj").read_text() == "the frames of another run"
    Path("run.json").write_text("{}")  # the trajectory is judged by the restart file
    with pytest.raises(SystemExit, match="run.json cannot be read"):
        main([*command, "--restart", "run.json"])  # which is refused with its reason
    assert Path("mine.traj").read_text() == "the frames of another run"
