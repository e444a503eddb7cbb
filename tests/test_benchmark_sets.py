"""The molecule sets shipped with asebo and the relaxation tables run on them."""

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.io import read

from asebo.benchmarks import baker, druglike, druglike2, druglike3, large, rough, s22
from asebo.benchmarks._relaxation_table import distance_from_start
from asebo.campaign.relax import relax
from asebo.cli import main
from asebo.optimize.settings import SpecialCases


def test_the_baker_and_druglike_sets_are_shipped_and_readable():
    baker_files = sorted(baker.DEFAULT_DIR.glob("*.xyz"))
    druglike_files = sorted(druglike.DEFAULT_DIR.glob("*.xyz"))
    assert len(baker_files) == 30 and len(druglike_files) == 12
    sizes = [len(read(f)) for f in baker_files]
    assert min(sizes) == 3 and max(sizes) == 29  # water ... menthone
    assert [len(read(f)) for f in druglike_files if f.stem == "sildenafil"] == [63]


def assert_rebuilt_from_their_smiles(files, seed):
    """Each file's comment line names it and gives the SMILES that RDKit, with the
    set's embedding seed, turns into the very same start."""
    from asebo.smiles import molecule_from_smiles

    for f in files:
        name, smiles = f.read_text().splitlines()[1].split()[:2]
        assert name == f.stem
        atoms = read(f)
        built = molecule_from_smiles(smiles, random_state=seed)
        assert list(built.numbers) == list(atoms.numbers)
        assert abs(built.positions - atoms.positions).max() < 1e-4


def test_the_second_druglike_set_holds_other_molecules_with_their_smiles():
    files = sorted(druglike2.DEFAULT_DIR.glob("*.xyz"))
    assert len(files) == 12
    assert not {f.stem for f in files} & {f.stem for f in druglike.DEFAULT_DIR.glob("*.xyz")}
    assert_rebuilt_from_their_smiles(files[:3], seed=0)


def test_the_check_sets_hold_other_molecules_rebuilt_from_their_smiles():
    third = sorted(druglike3.DEFAULT_DIR.glob("*.xyz"))
    starts = sorted(rough.DEFAULT_DIR.glob("*.xyz"))
    assert len(third) == 16 and len(starts) == 40
    earlier = {f.stem for s in (druglike, druglike2) for f in s.DEFAULT_DIR.glob("*.xyz")}
    assert not {f.stem for f in third} & earlier
    assert_rebuilt_from_their_smiles(third[:2], seed=3)
    # rough starts: raw embeddings, no force field
    assert all("no force field" in f.read_text().splitlines()[1] for f in starts)


def test_the_large_set_holds_flexible_molecules_of_50_to_150_atoms_from_their_smiles():
    files = sorted(large.DEFAULT_DIR.glob("*.xyz"))
    assert len(files) >= 12
    sizes = [len(read(f)) for f in files]
    assert min(sizes) >= 50 and max(sizes) <= 150
    shipped = {
        f.stem for s in (baker, druglike, druglike2, druglike3) for f in s.DEFAULT_DIR.glob("*.xyz")
    }
    assert not {f.stem for f in files} & shipped
    assert_rebuilt_from_their_smiles(files[:2], seed=3)


def test_the_s22_set_is_ases_collection():
    from ase.collections import s22 as collection

    files = sorted(s22.DEFAULT_DIR.glob("*.xyz"))
    assert sorted(f.stem for f in files) == sorted(collection.names)
    for f in files:
        shipped, reference = read(f), collection[f.stem]
        assert list(shipped.numbers) == list(reference.numbers)
        assert abs(shipped.positions - reference.positions).max() < 1e-6


def test_baker_table_counts_the_calls_of_each_optimizer(tmp_path, capsys):
    table = tmp_path / "baker.md"
    main(
        [
            "bench",
            "baker",
            "--molecules",
            "00_water",
            "--optimizers",
            "lbfgs",
            "fire",
            "--calc",
            "emt",
            "--jobs",
            "1",
            "--markdown",
            str(table),
        ]
    )
    printed = capsys.readouterr().out
    assert table.read_text().strip() == printed.strip()
    start = read(baker.DEFAULT_DIR / "00_water.xyz")
    runs = [relax(start, name, EMT(), fmax=0.05, steps=300) for name in ("lbfgs", "fire")]
    calls = [run["calls"] for run in runs]
    assert f"| 00_water | {calls[0]} | {calls[1]} |" in printed
    assert f"| **total** | {calls[0]} | {calls[1]} |" in printed
    moved = [distance_from_start(start, run["positions"]) for run in runs]
    assert f"| **RMSD from the start, Å (median)** | {moved[0]:.2f} | {moved[1]:.2f} |" in printed


def test_the_distance_from_the_start_is_the_least_over_rigid_motions():
    """Against a reference: the RMSD minimised over rotation vectors by scipy, the
    centroids matched (the best translation for any rotation)."""
    from scipy.optimize import minimize
    from scipy.spatial.transform import Rotation

    start = read(baker.DEFAULT_DIR / "08_ethanol.xyz")
    rng = np.random.default_rng(0)
    distorted = start.positions + rng.normal(scale=0.2, size=start.positions.shape)
    moved = Rotation.from_rotvec([0.4, -1.1, 2.0]).apply(distorted) + [3.0, -1.0, 0.5]
    centred = start.positions - start.positions.mean(axis=0)
    ends = moved - moved.mean(axis=0)

    def rmsd(rotvec):
        turned = Rotation.from_rotvec(rotvec).apply(ends)
        return np.sqrt(np.mean(np.sum((turned - centred) ** 2, axis=1)))

    best = min(
        (
            minimize(rmsd, guess, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12})
            for guess in rng.normal(scale=2.0, size=(8, 3))
        ),
        key=lambda found: found.fun,
    )
    assert distance_from_start(start, moved) == pytest.approx(best.fun, rel=1e-6)
    assert distance_from_start(
        start, Rotation.from_rotvec([1.0, 2.0, 0.3]).apply(start.positions) - 4.0
    ) == pytest.approx(0.0, abs=1e-10)


def test_the_table_gives_how_far_each_higher_minimum_and_the_lowest_lie_from_the_start():
    from asebo.benchmarks._materials import table

    run = {"converged": True, "seconds_outside": 1.0, "steps": 4, "calls": 5}
    results = {
        "a": {
            "bo": {**run, "energy": -1.0, "rmsd_from_start": 0.3},
            "sella": {**run, "energy": -1.05, "rmsd_from_start": 1.5},
        },
        "b": {
            "bo": {**run, "energy": -2.0, "rmsd_from_start": 0.1},
            "sella": {**run, "energy": -2.0, "rmsd_from_start": 0.2},
        },
    }
    text = table(results, ["bo", "sella"], first_column="molecule")
    assert "- bo higher minima: a (+0.050 eV, 0.30 Å from the start; the lowest 1.50 Å)" in text
    assert "| **RMSD from the start, Å (median)** | 0.20 | 0.85 |" in text


@pytest.mark.parametrize(
    "molecule, flag, options",
    [
        # water's start is C2v: the probe costs a call
        (
            "00_water",
            ["--symmetry-probe", "0.1"],
            {"special_cases": SpecialCases(symmetry_probe=0.1)},
        ),
        # the pessimistic bound takes allene another way
        ("04_allene", ["--kappa", "-1"], {"kappa": -1.0}),
    ],
)
def test_bos_options_on_the_command_line_reach_bo(capsys, molecule, flag, options):
    command = ["bench", "baker", "--molecules", molecule, "--optimizers", "bo", "--jobs", "1"]
    main(command)
    main(command + flag)
    printed = capsys.readouterr().out
    start = read(baker.DEFAULT_DIR / f"{molecule}.xyz")
    calls = [
        relax(start, "bo", "gfn2", fmax=0.05, steps=300, options=given)["calls"]
        for given in (None, options)
    ]
    assert calls[1] != calls[0]
    for count in calls:
        assert f"| {molecule} | {count} |" in printed


def test_druglike_table_marks_unconverged_runs(capsys):
    main(
        [
            "bench",
            "druglike",
            "--molecules",
            "nicotine",
            "--optimizers",
            "bfgs",
            "--calc",
            "lj",
            "--steps",
            "3",
            "--jobs",
            "1",
        ]
    )
    printed = capsys.readouterr().out
    assert "| nicotine | 4* |" in printed  # 3 steps: 4 calls, not converged
    assert "- bfgs not converged: nicotine" in printed


def test_relaxation_tables_refuse_unknown_optimizers_and_empty_selections():
    with pytest.raises(SystemExit, match="unknown optimizer 'newton': choose among bo, bfgs"):
        main(["bench", "baker", "--optimizers", "newton"])
    with pytest.raises(SystemExit, match="no xyz file in .* matches nothing-like-this"):
        main(["bench", "druglike", "--molecules", "nothing-like-this"])


def test_the_saddle_guesses_of_the_reactions_are_their_middle_frames_with_their_charge():
    from asebo.benchmarks import neb, ts

    names = ts.guesses(folder="reactions")
    assert names == sorted(path.stem for path in neb.REACTIONS.glob("*.xyz"))
    for name in names:
        frames = read(neb.REACTIONS / f"{name}.xyz", index=":")
        atoms = ts.guess(name, "reactions")
        assert np.allclose(atoms.positions, frames[1].positions)
        charge = atoms.get_initial_charges().sum()
        electrons = atoms.numbers.sum() - charge
        assert atoms.get_initial_magnetic_moments().sum() == electrons % 2
    anion = ts.guess("18_sn2", "reactions")  # F- + CH3Cl: 36 electrons, a singlet
    assert anion.get_initial_charges().sum() == -1
    assert anion.get_initial_magnetic_moments().sum() == 0


@pytest.mark.parametrize(
    ("name", "charge", "multiplicity"), [("18_sn2", -1, 1), ("15_oxirane", 0, 2)]
)
def test_the_reactions_bands_are_computed_with_their_charge_and_spin(name, charge, multiplicity):
    from tblite.ase import TBLite

    from asebo.benchmarks import neb

    initial, final, _ = neb.reaction(neb.REACTIONS / f"{name}.xyz")
    for end in (initial, final):
        probe = end.copy()
        probe.set_initial_charges(np.zeros(len(probe)))
        probe.set_initial_magnetic_moments(np.zeros(len(probe)))
        probe.calc = TBLite(charge=charge, multiplicity=multiplicity, verbosity=0)
        assert end.get_potential_energy() == pytest.approx(probe.get_potential_energy(), abs=1e-6)


def test_end_states_apart_by_a_rigid_motion_alone_are_one_state():
    from ase.build import molecule

    from asebo.benchmarks.neb import SAME_STATE, end_state_rmsd

    water = molecule("H2O")
    turned = water.copy()
    turned.rotate(70, "z")
    turned.translate((1.0, -2.0, 0.5))
    assert end_state_rmsd(water, turned) < 1e-8
    bent = water.copy()
    bent.positions[1] += (0.0, 0.3, 0.0)
    assert end_state_rmsd(water, bent) > SAME_STATE


@pytest.mark.parametrize(
    "argv, words",
    [
        (["ts", "--jobs", "0"], "argument --jobs: must be a whole number of 1 or more, got '0'"),
        (["baker", "--fmax", "-1"], "argument --fmax: must be a positive number, got '-1'"),
        (["g2", "--rattle", "-1"], "argument --rattle: must be a number of 0 or more"),
        (["neb", "--steps", "-1"], "argument --steps: must be a whole number of 1 or more"),
        (["druglike", "--jobs", "x"], "argument --jobs: must be a whole number of 1 or more"),
    ],
)
def test_a_benchmark_number_that_cannot_be_is_refused_in_one_line(argv, words, capsys):
    from asebo.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", *argv])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert words in error and "Traceback" not in error


@pytest.mark.parametrize(
    "argv, words",
    [
        (["baker", "--calc", "nosuch"], "asebo bench baker --calc: unknown calculator"),
        (["neb", "--set", "reactions", "--reactions", "nosuch"], "--reactions: no nosuch in"),
        (["ts_workflow", "--set", "reactions", "--reactions", "nosuch"], "no nosuch in"),
    ],
)
def test_a_benchmark_name_that_is_not_there_is_refused_before_any_run(argv, words):
    from asebo.cli import main

    with pytest.raises(SystemExit, match=words):
        main(["bench", *argv])
