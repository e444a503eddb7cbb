"""`asebo optimize`: one-line errors for bad input, no overwritten output without --force."""

import numpy as np
import pytest
from ase import Atoms
from ase.io import read

from asebo.cli import main


def argon_file(tmp_path, count=4, name="argon.xyz"):
    positions = np.array([[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]])[:count]
    path = tmp_path / name
    Atoms(f"Ar{count}" if count else "", positions=positions).write(path)
    return path


def one_line_exit(argv, match):
    with pytest.raises(SystemExit, match=match) as raised:
        main(argv)
    message = str(raised.value.code)
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
