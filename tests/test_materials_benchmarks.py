"""The periodic benchmark sets (surfaces, bulk, cells, adsorbates) and their table."""

import argparse

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.filters import FrechetCellFilter
from ase.optimize import BFGS, FIRE
from ase.optimize.precon import Exp, PreconLBFGS

from asebo import BOOptimizer
from asebo.benchmarks import _materials
from asebo.benchmarks.adsorbates import ADSORBATES, adsorbate_systems
from asebo.benchmarks.bulk import bulk_systems
from asebo.benchmarks.cells import emt_cells, gpaw_cells
from asebo.benchmarks.surfaces import surface_systems

SETS = {
    "surfaces": surface_systems,
    "bulk": bulk_systems,
    "cells": emt_cells,
    "gpaw cells": gpaw_cells,
    "adsorbates": adsorbate_systems,
}


class CountingEMT(EMT):
    """EMT that counts its calculations."""

    def __init__(self):
        super().__init__()
        self.ncalls = 0

    def calculate(self, *args, **kwargs):
        self.ncalls += 1
        super().calculate(*args, **kwargs)


@pytest.mark.parametrize("name", SETS)
def test_sets_and_starts_are_the_same_when_built_twice(name):
    first, second = SETS[name](), SETS[name]()
    assert [s.name for s in first] == [s.name for s in second]
    assert len({s.name for s in first}) == len(first)
    for a, b in zip(first, second):
        for k in range(2):
            start_a, start_b = a.start(k), b.start(k)
            assert np.array_equal(start_a.positions, start_b.positions)
            assert np.array_equal(start_a.cell.array, start_b.cell.array)
            assert start_a.get_chemical_symbols() == start_b.get_chemical_symbols()
        assert not np.allclose(a.start(0).positions, a.start(1).positions)


def test_the_sets_have_the_sizes_the_issue_asks_for():
    assert len(surface_systems()) + len(bulk_systems()) >= 20
    assert len(surface_systems()) >= 20
    for system in surface_systems():
        assert 20 <= len(system.atoms) <= 40
        assert tuple(system.atoms.pbc) == (True, True, False)
    for system in bulk_systems() + emt_cells() + gpaw_cells():
        assert system.atoms.pbc.all()


def test_the_bottom_two_layers_of_every_slab_are_fixed_and_nothing_else():
    for system in surface_systems():
        fixed = system.fixed()
        free = np.setdiff1d(np.arange(len(system.atoms)), fixed)
        z = system.atoms.positions[:, 2]
        assert len(fixed) == 2 * 3 * 3, system.name  # two layers of 3 × 3 atoms
        assert z[fixed].max() < z[free].min() - 0.5, system.name
        tags = system.atoms.get_tags()
        if tags.any():  # (111), (100), (110): layers tagged 1 (top) to 4
            assert np.array_equal(fixed, np.flatnonzero(tags >= 3)), system.name
    for system in bulk_systems() + emt_cells() + gpaw_cells():
        assert len(system.fixed()) == 0 and not system.atoms.constraints


@pytest.mark.parametrize("name", ["surfaces", "bulk", "cells", "adsorbates"])
def test_emt_energies_are_finite_and_starts_stay_within_their_amplitude(name):
    for system in SETS[name]():
        atoms = system.atoms.copy()
        atoms.calc = EMT()
        assert np.isfinite(atoms.get_potential_energy()), system.name
        assert np.isfinite(atoms.get_forces()).all(), system.name
        for k in range(2):
            start = system.start(k)
            # the strain of the start's cell, then the displacement of its atoms
            deformation = np.linalg.solve(system.atoms.cell.array, start.cell.array)  # (3, 3)
            strain = deformation - np.eye(3)
            np.testing.assert_allclose(strain, strain.T, atol=1e-12)
            assert np.abs(strain).max() <= system.strain + 1e-12
            displacement = start.positions - system.atoms.positions @ deformation  # (n, 3)
            assert np.abs(displacement).max() <= system.amplitude + 1e-12, system.name
            assert np.abs(displacement).max() > 0.5 * system.amplitude, system.name
            fixed = system.fixed()
            assert np.array_equal(start.positions[fixed], system.atoms.positions[fixed])
            start.calc = EMT()
            assert np.isfinite(start.get_potential_energy()), system.name


def test_each_adsorbate_sits_on_both_facets_above_a_slab_with_its_bottom_layer_fixed():
    systems = adsorbate_systems()
    assert len(systems) == 2 * len(ADSORBATES) == 8
    for system in systems:
        atoms = system.atoms
        adsorbate = system.name.split("_")[0]
        slab = np.flatnonzero(atoms.numbers == 29)  # (12,) Cu
        assert len(slab) == 12 and len(atoms) == 12 + len(ADSORBATES[adsorbate])
        assert tuple(atoms.pbc) == (True, True, False)
        fixed, z = system.fixed(), atoms.positions[:, 2]
        assert np.array_equal(fixed, np.flatnonzero(atoms.get_tags() == 3))  # one layer of 4
        assert len(fixed) == 4 and z[fixed].max() < z[np.setdiff1d(slab, fixed)].min() - 0.5
        bonding = len(slab)  # the adsorbate's bonding atom (H, O, O, C) comes first
        assert z[bonding] > z[slab].max() + 0.9
        assert atoms.cell[2, 2] - z.max() >= 4.9 and z.min() >= 4.9  # 5 Å vacuum each side


def test_cells_are_strained_and_others_are_not():
    for system in emt_cells():
        assert system.strain > 0
        assert not np.allclose(system.start(0).cell.array, system.atoms.cell.array)
    for system in surface_systems() + bulk_systems():
        assert np.array_equal(system.start(0).cell.array, system.atoms.cell.array)


def _args(tmp_path, systems, optimizers):
    return argparse.Namespace(
        systems=systems,
        list=False,
        optimizers=optimizers,
        starts=1,
        fmax=0.05,
        steps=300,
        jobs=1,
        markdown=tmp_path / "table.md",
        json=None,
    )


def _row(markdown, row):
    line = next(line for line in markdown.splitlines() if line.startswith(f"| {row} |"))
    return [cell.strip() for cell in line.strip("|").split("|")[1:]]


def _direct(atoms, optimizer, wrap=None):
    calc = CountingEMT()
    atoms.calc = calc
    target = wrap(atoms) if wrap else atoms
    assert optimizer(target).run(fmax=0.05, steps=300)
    return calc.ncalls


def test_the_surface_table_counts_the_calls_of_a_direct_run(tmp_path):
    system = next(s for s in surface_systems() if s.name == "Al111_vacancy")
    args = _args(tmp_path, ["Al111_vacancy"], ["bfgs", "fire"])
    _materials.run(args, surface_systems())
    markdown = args.markdown.read_text()
    bfgs = _direct(system.start(0), lambda a: BFGS(a, logfile=None))
    fire = _direct(system.start(0), lambda a: FIRE(a, logfile=None))
    assert _row(markdown, "Al111_vacancy/1") == [str(bfgs), str(fire)]
    assert _row(markdown, "**total**") == [str(bfgs), str(fire)]
    assert _row(markdown, "**/ BFGS**") == ["1.00", f"{fire / bfgs:.2f}"]


def test_the_kappa_option_reaches_bo_on_a_slab(tmp_path):
    system = next(s for s in surface_systems() if s.name == "Ni100_adatom")
    args = _args(tmp_path, ["Ni100_adatom"], ["bo"])
    args.kappa = -3.0
    _materials.run(args, surface_systems())
    default = _direct(system.start(0), lambda a: BOOptimizer(a, logfile=None))
    pessimistic = _direct(system.start(0), lambda a: BOOptimizer(a, logfile=None, kappa=-3.0))
    assert pessimistic != default  # the pessimistic bound takes the adatom another way
    assert _row(args.markdown.read_text(), "Ni100_adatom/1") == [str(pessimistic)]


def test_the_cell_table_counts_the_calls_of_a_direct_run_through_the_filter(tmp_path):
    from asebo.benchmarks import cells

    system = next(s for s in emt_cells() if s.name == "Cu_fcc")
    args = _args(tmp_path, ["Cu_fcc"], ["bfgs", "preconlbfgs"])
    args.calc, args.filter = "emt", "frechet"
    cells.run(args)
    markdown = args.markdown.read_text()
    bfgs = _direct(system.start(0), lambda a: BFGS(a, logfile=None), FrechetCellFilter)
    precon = _direct(
        system.start(0), lambda a: PreconLBFGS(a, precon=Exp(), logfile=None), FrechetCellFilter
    )
    assert _row(markdown, "Cu_fcc/1") == [str(bfgs), str(precon)]


def test_the_adsorbate_table_counts_the_calls_of_a_direct_run_and_refuses_other_calculators(
    tmp_path,
):
    from asebo.benchmarks import adsorbates

    system = next(s for s in adsorbate_systems() if s.name == "CO_Cu100")
    args = _args(tmp_path, ["CO_Cu100"], ["bfgs"])
    args.calc = "emt"
    adsorbates.run(args)
    bfgs = _direct(system.start(0), lambda a: BFGS(a, logfile=None))
    assert _row(args.markdown.read_text(), "CO_Cu100/1") == [str(bfgs)]
    args.calc = "lj"
    with pytest.raises(SystemExit, match="choose 'emt' or 'gpaw'"):
        adsorbates.run(args)


def test_the_table_flags_refusals_higher_minima_and_divides_by_gpmin_and_bfgs():
    run = {"converged": True, "seconds_outside": 1.0, "steps": 4}
    results = {
        "A/1": {
            "bo": {"error": "TypeError: filters are refused", "calls": 0, "refused": True},
            "bfgs": {**run, "calls": 10, "energy": -1.0},
            "gpmin": {**run, "calls": 5, "energy": -1.02},
        },
        "A/2": {
            "bo": {**run, "calls": 3, "energy": -2.0, "converged": False},
            "bfgs": {**run, "calls": 20, "energy": -2.0},
            "gpmin": {**run, "calls": 10, "energy": -2.005},
        },
    }
    text = _materials.table(results, ["bo", "bfgs", "gpmin"])
    assert _row(text, "A/1") == ["refused", "10^", "5"]
    assert _row(text, "A/2") == ["3*", "20", "10"]
    assert _row(text, "**total**") == ["3", "30", "15"]
    assert _row(text, "**converged**") == ["0/2", "2/2", "2/2"]
    assert _row(text, "**/ GPMin**") == ["0.20", "2.00", "1.00"]
    assert _row(text, "**/ BFGS**") == ["0.10", "1.00", "0.50"]
    assert "- bo failed on A/1: TypeError: filters are refused" in text
    assert "- bfgs higher minima: A/1 (+0.020 eV)" in text
    results["A/2"]["bo"] = results["A/1"]["bo"]
    refused = _materials.table(results, ["bo", "bfgs", "gpmin"])
    assert _row(refused, "**total**") == ["-", "30", "15"]  # no run of bo: no total
    assert _row(refused, "**/ BFGS**") == ["-", "1.00", "0.50"]
    assert "- bo failed on every start: TypeError: filters are refused" in refused


def test_a_cell_relaxation_records_one_energy_per_call_and_converges_the_filter():
    from asebo.campaign.relax import relax

    start = next(s for s in emt_cells() if s.name == "Cu_fcc").start(1)
    result = relax(start, "bfgs", EMT(), fmax=0.05, steps=300, cell_filter="frechet")
    assert result["converged"]
    assert len(result["energies"]) == result["calls"]
    relaxed = start.copy()
    relaxed.set_cell(result["cell"])
    relaxed.positions = result["positions"]
    relaxed.calc = EMT()
    assert relaxed.get_potential_energy() == pytest.approx(result["energy"], abs=1e-12)
    assert np.abs(relaxed.get_stress()).max() == pytest.approx(result["stress"], abs=1e-12)
    assert result["fmax"] < 0.05
    # a filter built on the relaxed cell measures the cell's forces from there: within 10 %
    forces = FrechetCellFilter(relaxed).get_forces()  # (n + 3, 3)
    assert np.linalg.norm(forces, axis=1).max() < 1.1 * 0.05


def test_relax_refuses_an_unknown_cell_filter_before_any_call():
    from asebo.campaign.relax import relax

    calc = CountingEMT()
    with pytest.raises(ValueError, match="unknown cell filter 'frechett': choose among frechet"):
        relax(emt_cells()[0].start(0), "bfgs", calc, cell_filter="frechett")
    assert calc.ncalls == 0


def test_a_system_keeps_its_own_calculator_options_under_those_of_the_preset_name():
    pytest.importorskip("gpaw")
    from asebo.benchmarks.cells import GPAW_PRESET

    magnesia = next(s for s in gpaw_cells() if s.name == "MgO_rocksalt")
    default = _materials.system_calculator(GPAW_PRESET, magnesia)
    assert default.options["ecut"] == 600 and default.options["kpts"] == (2, 2, 2)
    chosen = _materials.system_calculator("gpaw:mode=pw,ecut=450", magnesia)
    assert chosen.options["ecut"] == 450 and chosen.options["kpts"] == (2, 2, 2)
    silicon = next(s for s in gpaw_cells() if s.name == "Si_diamond")
    assert _materials.system_calculator(GPAW_PRESET, silicon).options["ecut"] == 300


def test_the_users_regime_takes_ten_molecules_of_3_to_21_atoms_and_five_slabs():
    pytest.importorskip("tblite")
    from asebo.benchmarks.users import SLABS, molecule_systems
    from calculators import get_calculator

    molecules = molecule_systems()
    sizes = [len(system.atoms) for system in molecules]
    assert len(molecules) == 10 and min(sizes) == 3 and max(sizes) == 21
    assert not any(system.atoms.pbc.any() for system in molecules)
    built = molecule_systems(["glycerol"])[0].atoms  # from SMILES, at GFN2-xTB's minimum
    built.calc = get_calculator("gfn2")
    assert np.linalg.norm(built.get_forces(), axis=1).max() < 0.01
    slabs = [system for system in adsorbate_systems() if system.name in SLABS]
    assert len(slabs) == 5 and all(system.atoms.pbc[:2].all() for system in slabs)
