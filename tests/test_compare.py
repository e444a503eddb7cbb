"""Tests of comparison campaigns: molecules, starts, storage, restart, summary, plots."""

import os
import re

import ase.db
import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule
from ase.calculators.calculator import CalculationFailed
from ase.calculators.emt import EMT
from ase.io import write
from dask.distributed import LocalCluster

from asebo.campaign import (
    Campaign,
    CampaignMismatchError,
    CampaignStore,
    best_energy_curves,
    format_result,
    load_molecule,
    molecule_from_smiles,
    perturbed_start,
    plan_runs,
    plot_best_energy,
    plot_runs,
    run_campaign,
    summarize,
)
from asebo.campaign.plan import parse_optimizer
from asebo.cli import main


class CountingEMT(EMT):
    """EMT that counts its calculations in a class attribute shared by its copies."""

    calculations = 0

    def calculate(self, *args, **kwargs):
        type(self).calculations += 1
        super().calculate(*args, **kwargs)


class FailingEMT(EMT):
    """EMT that fails, as an SCF that does not converge, at one given geometry."""

    def __init__(self, bad_positions, **kwargs):
        super().__init__(**kwargs)
        self.bad_positions = np.asarray(bad_positions, dtype=np.float64)  # (n, 3)

    def calculate(self, atoms=None, *args, **kwargs):
        if (
            atoms is not None
            and atoms.positions.shape == self.bad_positions.shape
            and np.allclose(atoms.positions, self.bad_positions, atol=1e-10)
        ):
            raise CalculationFailed("SCF did not converge at this geometry")
        super().calculate(atoms, *args, **kwargs)


def quick_campaign(
    db,
    calc="emt",
    starts=2,
    optimizers=("lbfgs", "bfgs"),
    fmax=0.05,
    molecules=("H2O", "NH3"),
    **kwargs,
):
    return run_campaign(
        list(molecules),
        list(optimizers),
        starts=starts,
        noise=0.05,
        seed=1,
        calc=calc,
        fmax=fmax,
        steps=100,
        db=db,
        scheduler="serial",
        progress=False,
        log=lambda line: None,
        **kwargs,
    )


def distances(atoms, symbol_a, symbol_b):
    """All distances between atoms of the two elements, Å."""
    d = atoms.get_all_distances()
    symbols = np.array(atoms.get_chemical_symbols())
    mask = np.outer(symbols == symbol_a, symbols == symbol_b)
    return d[mask & (d > 0)]


# molecules


def test_smiles_builds_ethanol_reproducibly():
    atoms = molecule_from_smiles("CCO")
    assert atoms.get_chemical_formula() == "C2H6O"
    bonded = lambda a, b, cut: [x for x in distances(atoms, a, b) if x < cut]  # noqa: E731
    assert np.allclose(bonded("C", "C", 1.7), 1.51, atol=0.03)
    assert np.allclose(bonded("C", "O", 1.7), 1.42, atol=0.03)
    assert len(bonded("C", "H", 1.2)) == 5 and np.allclose(bonded("C", "H", 1.2), 1.09, atol=0.02)
    assert np.array_equal(atoms.positions, molecule_from_smiles("CCO").positions)


def test_smiles_formal_charge_becomes_total_charge():
    atoms = molecule_from_smiles("[NH4+]")
    assert atoms.get_chemical_formula() == "H4N"
    assert atoms.get_initial_charges().sum() == pytest.approx(1.0)


def test_names_prefix_and_files(tmp_path):
    label, water = load_molecule("water")
    assert label == "water"
    assert np.array_equal(water.positions, molecule("H2O").positions)
    assert load_molecule("CO")[1].get_chemical_formula() == "CO"  # a name before a SMILES
    assert load_molecule("smiles:CO")[1].get_chemical_formula() == "CH4O"
    path = tmp_path / "bent.xyz"
    bent = molecule("H2O")
    bent.positions[1] += [0.0, 0.1, 0.0]
    write(path, bent)
    label, read_back = load_molecule(str(path))
    assert label == "bent"
    assert np.allclose(read_back.positions, bent.positions)


def test_bad_molecules_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="invalid SMILES 'C1CC'"):
        load_molecule("smiles:C1CC")
    with pytest.raises(ValueError, match="unknown molecule 'Unobtainium'"):
        load_molecule("Unobtainium")
    with pytest.raises(ValueError, match="Did you mean water"):
        load_molecule("watr")
    with pytest.raises(ValueError, match="no molecule file"):
        load_molecule(str(tmp_path / "missing.xyz"))
    garbage = tmp_path / "garbage.xyz"
    garbage.write_text("this is\nnot an xyz file\n")
    with pytest.raises(ValueError, match="cannot read molecule file"):
        load_molecule(str(garbage))


# plan


def test_perturbation_is_seeded_gaussian_and_stable():
    reference = molecule("C60")
    first = perturbed_start(reference, "C60", 3, 0.1, seed=7)
    assert np.array_equal(first.positions, perturbed_start(reference, "C60", 3, 0.1, 7).positions)
    assert not np.allclose(first.positions, perturbed_start(reference, "C60", 3, 0.1, 8).positions)
    assert np.array_equal(
        perturbed_start(reference, "C60", 0, 0.1, 7).positions, reference.positions
    )
    noise = np.concatenate(
        [
            (perturbed_start(reference, "C60", s, 0.1, 7).positions - reference.positions).ravel()
            for s in range(1, 21)
        ]
    )  # (3600,)
    # sample std of 3600 normal draws is within 5 % of sigma with overwhelming odds
    assert np.std(noise) == pytest.approx(0.1, rel=0.05)
    assert abs(noise.mean()) < 4 * 0.1 / np.sqrt(noise.size)


def test_plan_gives_every_optimizer_the_same_starts_and_keeps_them_when_extended():
    campaign = Campaign(calc="emt", noise=0.1, seed=3)
    molecules = [("H2O", molecule("H2O"))]
    two = plan_runs(molecules, ["lbfgs", "fire"], 2, campaign)
    three = plan_runs(molecules, ["lbfgs", "fire"], 3, campaign)
    assert [r.name for r in two] == [("H2O", o, s) for s in (1, 2) for o in ("lbfgs", "fire")]
    for a, b in zip(two[::2], two[1::2]):
        assert np.array_equal(a.atoms.positions, b.atoms.positions)
    for a, b in zip(two, three):
        assert a.name == b.name and np.array_equal(a.atoms.positions, b.atoms.positions)
    assert [r.start for r in plan_runs(molecules, ["lbfgs"], 0, campaign)] == [0]


def test_optimizer_labels_and_priors():
    assert parse_optimizer("bo+gfn1") == ("bo+gfn1", "bo", "gfn1")
    assert parse_optimizer("bo", prior="gfn1") == ("bo+gfn1", "bo", "gfn1")
    assert parse_optimizer("lbfgs", prior="gfn1") == ("lbfgs", "lbfgs", None)
    assert parse_optimizer("BO+lj:sigma=1.2") == ("bo+lj:sigma=1.2", "bo", "lj:sigma=1.2")
    for bad, message in [
        ("newton", "unknown optimizer"),
        ("lbfgs+gfn1", "only bo"),
        ("bo+dftb", "unknown prior"),
        ("bo+", "names no prior after '\\+'"),  # it ran a plain bo
    ]:
        with pytest.raises(ValueError, match=message):
            parse_optimizer(bad)


def test_campaign_key_and_settings_validation():
    assert Campaign(calc="emt").key == Campaign(calc="EMT").key
    keys = {
        Campaign(calc="emt", **change).key
        for change in ({}, {"fmax": 0.02}, {"noise": 0.2}, {"seed": 1}, {"steps": 50})
    }
    assert len(keys) == 5
    assert Campaign(calc="gfn2").key != Campaign(calc="gfn1").key
    # a preset with options: one key whatever their order, another than without them
    assert Campaign(calc="gpaw:vacuum=3.5,h=0.25").settings()["calc"] == "gpaw:h=0.25,vacuum=3.5"
    assert Campaign(calc="gpaw:h=0.25").key not in {
        Campaign(calc="gpaw:h=0.2").key,
        Campaign(calc="gpaw").key,
    }
    for bad in (
        {"fmax": 0.0},
        {"noise": -0.1},
        {"steps": 0},
        {"seed": 1.5},
        {"calc": "dftb"},
        {"fmax": np.nan},
    ):
        with pytest.raises(ValueError):
            Campaign(**{"calc": "emt", **bad})


class EMTWithOpenLog(EMT):
    """EMT holding an open file, as a GPAW calculator holds its text output."""

    def __init__(self):
        super().__init__()
        self.log = open(os.devnull, "w")


def test_a_calculator_that_cannot_be_copied_is_refused_with_the_preset_to_use():
    assert Campaign(calc=EMT()).settings()["calc"].startswith("emt:")
    with pytest.raises(ValueError, match="cannot be copied.*gpaw:h=0.25"):
        Campaign(calc=EMTWithOpenLog())


# storage and restart


def test_runs_are_stored_and_skipped_on_restart(tmp_path):
    db = tmp_path / "runs.db"
    CountingEMT.calculations = 0
    records = quick_campaign(db, calc=CountingEMT(), starts=1)
    rows = list(ase.db.connect(db).select())
    assert len(rows) == len(records) == 4
    assert CountingEMT.calculations == sum(row.calls for row in rows)
    for row in rows:
        assert row.calls == len(row.data.energies)
        assert row.energy == pytest.approx(row.data.energies[-1])
        assert row.converged and row.fmax < 0.05

    CountingEMT.calculations = 0
    again = quick_campaign(db, calc=CountingEMT(), starts=1)
    assert CountingEMT.calculations == 0
    assert [(r.molecule, r.optimizer, r.start, r.calls) for r in again] == [
        (r.molecule, r.optimizer, r.start, r.calls) for r in records
    ]

    quick_campaign(db, calc=CountingEMT(), starts=2)
    new_rows = list(ase.db.connect(db).select("start=2"))
    assert len(new_rows) == 4 and ase.db.connect(db).count() == 8
    assert CountingEMT.calculations == sum(row.calls for row in new_rows)


def test_other_campaign_or_geometry_is_refused_and_nothing_lost(tmp_path):
    db = tmp_path / "runs.db"
    quick_campaign(db, starts=1)
    before = [(row.id, row.calls) for row in ase.db.connect(db).select()]
    with pytest.raises(CampaignMismatchError, match="--fmax 0.02"):
        quick_campaign(db, starts=1, fmax=0.02)
    moved = molecule("H2O")
    moved.positions[0, 2] += 0.05
    ion = molecule("H2O")  # the same positions, a cation or a triplet: another system
    ion.set_initial_charges([1.0, 0.0, 0.0])
    triplet = molecule("H2O")
    triplet.set_initial_magnetic_moments([2.0, 0.0, 0.0])
    boxed = molecule("H2O", cell=[8.0, 8.0, 8.0], pbc=True)
    boxed.positions = molecule("H2O").positions
    for other in (moved, ion, triplet, boxed):
        with pytest.raises(CampaignMismatchError, match="another reference geometry"):
            quick_campaign(db, starts=1, molecules=[("H2O", other)])
    assert [(row.id, row.calls) for row in ase.db.connect(db).select()] == before

    foreign = tmp_path / "calls.db"
    ase.db.connect(foreign).write(molecule("H2O"))
    with pytest.raises(CampaignMismatchError, match="not comparison runs"):
        quick_campaign(foreign, starts=1)


def test_failing_calculator_is_recorded_and_the_campaign_goes_on(tmp_path):
    db = tmp_path / "runs.db"
    campaign = Campaign(calc="emt", noise=0.05, seed=1)
    bad = perturbed_start(molecule("H2O"), "H2O", 2, campaign.noise, campaign.seed)
    records = quick_campaign(db, calc=FailingEMT(bad.positions), optimizers=["lbfgs"])
    failed = [r for r in records if r.failed]
    assert [(r.molecule, r.start, r.calls) for r in failed] == [("H2O", 2, 0)]
    assert "CalculationFailed" in failed[0].error and "SCF did not converge" in failed[0].error
    assert np.isnan(failed[0].energy)
    assert sum(r.converged for r in records) == 3
    row = ase.db.connect(db).get(molecule="H2O", start=2)
    assert row.failed and np.array_equal(row.positions, bad.positions)

    records = quick_campaign(
        db, calc=FailingEMT(bad.positions), optimizers=["lbfgs"], retry_failed=True
    )
    assert ase.db.connect(db).count() == 4 and sum(r.failed for r in records) == 1


# summary and plots


def test_summary_against_hand_computation_on_stored_rows(tmp_path):
    db = tmp_path / "runs.db"
    quick_campaign(db, starts=3, optimizers=["lbfgs", "fire"])
    rows = list(ase.db.connect(db).select())
    summary = {(s.molecule, s.optimizer): s for s in summarize(CampaignStore(db).records())}
    assert set(summary) == {(m, o) for m in ("H2O", "NH3", "all") for o in ("lbfgs", "fire")}
    best = {m: min(r.data.energies.min() for r in rows if r.molecule == m) for m in ("H2O", "NH3")}
    for (name, optimizer), s in summary.items():
        mine = [r for r in rows if r.optimizer == optimizer and name in ("all", r.molecule)]
        lbfgs = [
            r.calls
            for r in rows
            if r.optimizer == "lbfgs" and r.converged and name in ("all", r.molecule)
        ]
        calls = [r.calls for r in mine if r.converged]
        gaps = [r.energy - best[r.molecule] for r in mine]
        assert (s.runs, s.converged) == (len(mine), len(calls))
        assert s.calls_mean == pytest.approx(np.mean(calls))
        assert s.calls_median == pytest.approx(np.median(calls))
        assert s.calls_max == max(calls)
        assert s.gap_mean == pytest.approx(np.mean(gaps))
        assert s.gap_max == pytest.approx(max(gaps))
        assert min(gaps) >= 0.0
        assert s.ratio == pytest.approx(np.mean(calls) / np.mean(lbfgs))
    fire = np.mean([r.calls for r in rows if r.converged and r.optimizer == "fire"])
    lbfgs = np.mean([r.calls for r in rows if r.converged and r.optimizer == "lbfgs"])
    assert format_result(list(summary.values())) == (
        f"Result: fire needed {fire / lbfgs:.2f} of lbfgs's force calls (mean calls over all "
        "molecules)."
    )


def test_best_energy_curve_is_the_mean_running_minimum(tmp_path):
    db = tmp_path / "runs.db"
    records = quick_campaign(db, starts=2, optimizers=["fire"], molecules=["H2O"])
    curve = best_energy_curves(records)["H2O"]["fire"]
    length = max(len(r.energies) for r in records)
    assert curve.shape == (length,)
    expected = np.mean(
        [
            [min(r.energies[: min(k, len(r.energies))]) for k in range(1, length + 1)]
            for r in records
        ],
        axis=0,
    )
    best = min(r.energies.min() for r in records)
    assert np.allclose(curve, expected - best)
    assert np.all(np.diff(curve) <= 0)


def test_plots_are_written_as_png_and_pdf(tmp_path):
    records = quick_campaign(tmp_path / "runs.db", starts=1, molecules=["H2O"])
    prefix = tmp_path / "fig" / "c"
    paths = plot_best_energy(records, prefix) + plot_runs(records, prefix)
    assert sorted(p.name for p in paths) == ["c_best.pdf", "c_best.png", "c_runs.pdf", "c_runs.png"]
    for path in paths:
        head = path.read_bytes()[:8]
        assert head.startswith(b"\x89PNG" if path.suffix == ".png" else b"%PDF")


# command line and Dask


def test_command_line_runs_bo_prints_table_and_refuses_bad_input(tmp_path, capsys):
    db, prefix = tmp_path / "cli.db", tmp_path / "cli"
    common = [
        "compare",
        "--calc",
        "emt",
        "--starts",
        "1",
        "--noise",
        "0.05",
        "--db",
        str(db),
        "--scheduler",
        "serial",
        "--no-progress",
    ]
    assert (
        main(common + ["--molecules", "H2O", "--optimizers", "bo", "lbfgs", "--plot", str(prefix)])
        == 0
    )
    out = capsys.readouterr().out
    assert "| molecule | optimizer |" in out and "| H2O | bo | 1 | 100% |" in out
    assert (tmp_path / "cli_best.png").exists() and (tmp_path / "cli_runs.pdf").exists()
    ratio = next(r.ratio for r in summarize(CampaignStore(db).records()) if r.optimizer == "bo")
    legend = "Calculator emt; a run converges when the largest force is below 0.05 eV/Å."
    result = f"Result: bo needed {ratio:.2f} of lbfgs's force calls (mean calls on H2O)."
    assert legend in out and out.rstrip().endswith(result)
    assert main(["compare", "--report", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "| H2O | lbfgs | 1 | 100% |" in out
    assert legend in out and out.rstrip().endswith(result)

    for bad, message in [
        (["--molecules", "H2O", "--fmax", "0.01"], "another campaign"),
        (["--molecules", "C1CC"], "unknown molecule 'C1CC'"),
        (["--molecules", "H2O", "--optimizers", "newton"], "unknown optimizer"),
    ]:
        assert main(common + bad) == 2
        assert message in capsys.readouterr().err
    assert ase.db.connect(db).count() == 2


@pytest.mark.parametrize(
    "options, prepare, message",
    [
        (["--report", "--db", "never.db"], None, "never.db does not exist"),
        (["--report", "--db", "bad.db"], "bad.db", "cannot be read as an ase.db database"),
        (
            ["--db", "nowhere/run.db", "--molecules", "H2O", "--calc", "emt"],
            None,
            "the folder .*nowhere does not exist",
        ),
        (  # the table written over the database: every run lost
            ["--db", "bad.db", "--molecules", "H2O", "--calc", "emt", "--markdown", "bad.db"],
            None,
            "--markdown 'bad.db' and --db 'bad.db' are the same file",
        ),
        (
            ["--db", "never.db", "--molecules", "bad.xyz", "--markdown", "bad.xyz"],
            "bad.xyz",
            "--markdown 'bad.xyz' and --molecules bad.xyz 'bad.xyz' are the same file",
        ),
        (
            ["--db", "never.db", "--molecules", "H2O", "--markdown", "nowhere/table.md"],
            None,
            "--markdown nowhere/table.md: the folder .*nowhere does not exist",
        ),
    ],
)
def test_a_database_that_cannot_be_used_is_refused_in_one_line(
    tmp_path, monkeypatch, capsys, options, prepare, message
):
    monkeypatch.chdir(tmp_path)
    if prepare is not None:
        (tmp_path / prepare).write_text("no database")
    assert main(["compare", *options]) == 2
    error = capsys.readouterr().err
    assert re.search(message, error) and "Traceback" not in error
    assert not (tmp_path / "never.db").exists()
    assert prepare is None or (tmp_path / prepare).read_text() == "no database"


def _dask_campaign(db, scheduler, workers=None):
    return run_campaign(
        ["H2O"],
        ["lbfgs", "fire"],
        starts=2,
        noise=0.05,
        seed=1,
        calc="emt",
        fmax=0.05,
        steps=100,
        db=db,
        scheduler=scheduler,
        workers=workers,
        progress=False,
        log=lambda line: None,
    )


def _same_runs(records, others):
    by_name = {(r.optimizer, r.start): r for r in others}
    assert len(by_name) == len(records) == 4
    for record in records:
        other = by_name[(record.optimizer, record.start)]
        assert other.calls == record.calls
        assert np.allclose(other.energies, record.energies, rtol=0, atol=1e-10)


def test_dask_scheduler_address_gives_the_serial_results(tmp_path):
    serial = _dask_campaign(tmp_path / "serial.db", "serial")
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        _same_runs(serial, _dask_campaign(tmp_path / "dask.db", cluster.scheduler_address))
    with pytest.raises(ValueError, match="no Dask scheduler answers"):
        _dask_campaign(tmp_path / "none.db", str(tmp_path / "missing-scheduler.json"))


@pytest.mark.slow
def test_default_local_cluster_of_processes_gives_the_serial_results(tmp_path):
    serial = _dask_campaign(tmp_path / "serial.db", "serial")
    _same_runs(serial, _dask_campaign(tmp_path / "dask.db", None, workers=1))


def test_lennard_jones_dimer_ends_at_its_known_bond_length(tmp_path):
    reference = Atoms("H2", positions=[[0, 0, 0], [0, 0, 1.3]])
    records = quick_campaign(
        tmp_path / "h2.db",
        calc="lj",
        molecules=[("H2", reference)],
        starts=1,
        optimizers=["bfgs", "fire"],
        fmax=1e-3,
    )
    assert all(r.converged for r in records)
    for row in ase.db.connect(tmp_path / "h2.db").select():
        # minimum of 4 (r^-12 - r^-6) at r = 2^(1/6), force constant 57 eV/Å²: |Δr| < 1e-4
        assert row.toatoms().get_distance(0, 1) == pytest.approx(2 ** (1 / 6), abs=1e-4)
    assert reference.calc is None and reference.positions[1, 2] == 1.3
