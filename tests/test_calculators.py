"""Tests of the calculator presets, the vacuum-box wrapper and the call recorder."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import ase.db
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, fcc100, fcc111, molecule
from ase.calculators.calculator import (
    CalculationFailed,
    Calculator,
    PropertyNotImplementedError,
    all_changes,
)
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter
from ase.io import read
from ase.optimize import BFGS
from scipy.spatial.transform import Rotation

import calculators
from asebo import BOOptimizer
from asebo.barrier.counted import CountedCalls
from calculators import (
    CellAwareGPAW,
    CountingCalculator,
    MoleculeBoxCalculator,
    RecordingCalculator,
    available,
    calculator_key,
    check_periodic_cell,
    get_calculator,
    kpoint_grid,
    kpoint_size,
    parse_preset,
)

DATA = Path(__file__).parent / "data"


def perturbed_water(seed=0, stdev=0.05):
    atoms = molecule("H2O")
    atoms.rattle(stdev=stdev, seed=seed)
    return atoms


def energy_and_forces(atoms, calc):
    atoms = atoms.copy()
    atoms.calc = calc
    return atoms.get_potential_energy(), atoms.get_forces()


class NonFiniteCalculator(Calculator):
    """A calculator that returns a NaN energy or infinite forces."""

    implemented_properties = ("energy", "forces")

    def __init__(self, bad="energy"):
        super().__init__()
        self.bad = bad

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        forces = np.zeros((len(self.atoms), 3))  # (n, 3)
        energy = 0.0
        if self.bad == "energy":
            energy = np.nan
        else:
            forces[0, 0] = np.inf
        self.results = {"energy": energy, "forces": forces}


# presets


@pytest.mark.parametrize("name", ["gfn2", "gfn1", "emt", "lj"])
def test_preset_gives_finite_energy_and_balanced_forces(name):
    energy, forces = energy_and_forces(perturbed_water(), get_calculator(name))
    assert np.isfinite(energy)
    assert forces.shape == (3, 3)
    assert np.isfinite(forces).all()
    assert np.abs(forces).max() > 1e-3
    # an isolated molecule has no net force (translation invariance)
    np.testing.assert_allclose(forces.sum(axis=0), 0.0, atol=1e-8)


def test_gfn1_and_gfn2_are_different_methods():
    atoms = perturbed_water()
    assert energy_and_forces(atoms, get_calculator("gfn1"))[0] != pytest.approx(
        energy_and_forces(atoms, get_calculator("gfn2"))[0], abs=1.0
    )


def test_gfn2_scf_that_fails_from_the_last_wavefunction_starts_again_from_scratch():
    # two configurations of an image of the H2CO + H2 -> CH3OH band, 0.19 Å apart:
    # tblite's SCF started from the first's wavefunction does not converge at the second
    tblite_ase = pytest.importorskip("tblite.ase")
    first, second = read(DATA / "meoh_scf_restart_pair.xyz", index=":")
    continuing = tblite_ase.TBLite(method="GFN2-xTB", verbosity=0)
    energy_and_forces(first, continuing)
    with pytest.raises(CalculationFailed):
        energy_and_forces(second, continuing)
    preset = get_calculator("gfn2")
    energy_and_forces(first, preset)
    energy, forces = energy_and_forces(second, preset)
    fresh_energy, fresh_forces = energy_and_forces(second, get_calculator("gfn2"))
    assert energy == pytest.approx(fresh_energy, abs=1e-6)
    np.testing.assert_allclose(forces, fresh_forces, atol=1e-5)


def test_gfn2_forces_are_minus_the_finite_difference_gradient():
    atoms = perturbed_water(seed=1)
    _, forces = energy_and_forces(atoms, get_calculator("gfn2"))
    step = 1e-3  # Å
    gradient = np.zeros((len(atoms), 3))  # (n, 3)
    for i in range(len(atoms)):
        for k in range(3):
            shifted = []
            for sign in (1, -1):
                moved = atoms.copy()
                moved.positions[i, k] += sign * step
                shifted.append(energy_and_forces(moved, get_calculator("gfn2"))[0])
            gradient[i, k] = (shifted[0] - shifted[1]) / (2 * step)
    np.testing.assert_allclose(forces, -gradient, atol=2e-4)


def test_chgnet_refuses_atoms_without_a_cell_in_one_line():
    # its graph of neighbours failed inside a matrix inversion: "Singular matrix"
    pytest.importorskip("chgnet")
    water = molecule("H2O")
    with pytest.raises(CalculationFailed, match="CHGNet computes atoms in a cell"):
        energy_and_forces(water, get_calculator("chgnet"))
    water.center(vacuum=6.0)
    water.pbc = True
    assert np.isfinite(energy_and_forces(water, get_calculator("chgnet"))[0])


def test_chgnet_forces_and_stress_are_derivatives_of_its_energy():
    pytest.importorskip("chgnet")
    calculator = get_calculator("chgnet")
    atoms = bulk("NaCl", "rocksalt", 5.7, cubic=True)
    atoms.rattle(0.05, seed=2)
    computed = atoms.copy()
    computed.calc = calculator
    forces = computed.get_forces()  # (n, 3)
    stress = computed.get_stress(voigt=False)  # (3, 3), eV/Å³

    def energy(cell, positions):
        moved = atoms.copy()
        moved.set_cell(cell)
        moved.positions = positions
        return energy_and_forces(moved, calculator)[0]

    step = 1e-2  # Å; the model computes in float32
    for i, k in [(0, 0), (3, 2), (6, 1)]:
        shifted = [atoms.positions.copy(), atoms.positions.copy()]
        shifted[0][i, k] += step
        shifted[1][i, k] -= step
        slope = (energy(atoms.cell, shifted[0]) - energy(atoms.cell, shifted[1])) / (2 * step)
        assert forces[i, k] == pytest.approx(-slope, abs=5e-3)
    strain = 1e-3  # isotropic: dE/dε = V tr(σ)
    scaled = [(1 + sign * strain) for sign in (1, -1)]
    ends = [energy(atoms.cell * f, atoms.positions * f) for f in scaled]
    slope = (ends[0] - ends[1]) / (2 * strain)
    assert atoms.get_volume() * np.trace(stress) == pytest.approx(slope, abs=0.02)
    # ASE's cell filters take the free energy, which CHGNet stores as its energy
    own = computed.get_potential_energy()
    assert FrechetCellFilter(computed).get_potential_energy() == pytest.approx(own)


def test_preset_keywords_reach_the_calculator():
    atoms = molecule("H2O")
    default = energy_and_forces(atoms, get_calculator("lj"))[0]
    wider = energy_and_forces(atoms, get_calculator("lj", sigma=1.2))[0]
    assert wider != pytest.approx(default)


def test_preset_options_in_the_name_reach_the_calculator():
    assert parse_preset("GPAW: h=0.25, vacuum=3.5,mode=lcao") == (
        "gpaw",
        {"h": 0.25, "vacuum": 3.5, "mode": "lcao"},
    )
    assert parse_preset("gfn2") == ("gfn2", {})
    atoms = molecule("H2O")
    assert energy_and_forces(atoms, get_calculator("lj:sigma=1.2"))[0] == pytest.approx(
        energy_and_forces(atoms, get_calculator("lj", sigma=1.2))[0]
    )
    # keywords win over the options of the name
    assert get_calculator("lj:sigma=1.2", sigma=1.0).parameters.sigma == 1.0
    for bad in ("lj:sigma", "lj:1x=2", "dftb:h=0.2"):
        with pytest.raises(ValueError, match="key=value|unknown calculator"):
            parse_preset(bad)


@pytest.mark.parametrize(
    "name, options, words",
    [
        ("gfn2", {"chrage": 1}, "the gfn2 preset has no option 'chrage'; its options: .*charge"),
        ("gfn2:Charge=1", {}, "no option 'Charge'"),
        ("gfn1", {"uhf": 2}, "no option 'uhf'.*multiplicity"),
        ("gfn2", {"method": "GFN1-xTB"}, "sets the method: use 'gfn1' or 'gfn2'"),
        ("lj:sigma=1.0,epsilon=abc", {}, "option epsilon='abc' of the lj preset is not a number"),
        ("emt", {"cutoff": 3.0}, "the emt preset has no option 'cutoff'"),
        ("gfn2:charge=+", {}, "option charge='\\+' of the gfn2 preset is not a whole number"),
        ("gfn1", {"multiplicity": 1.5}, "multiplicity=1.5 of the gfn1 preset is not a whole"),
    ],
)
def test_an_option_the_preset_does_not_have_is_refused(name, options, words):
    # tblite and ASE take unknown keywords silently: a misspelt charge ran the neutral
    # molecule
    with pytest.raises(ValueError, match=words):
        get_calculator(name, **options)


def test_commas_inside_brackets_belong_to_the_option():
    assert parse_preset("gpaw:kpts=(4, 4,1),mode=pw,basis=sz(dzp)") == (
        "gpaw",
        {"kpts": (4, 4, 1), "mode": "pw", "basis": "sz(dzp)"},
    )


def test_unknown_name_lists_the_presets():
    with pytest.raises(ValueError, match="unknown calculator 'dftb'.*gfn2.*gpaw"):
        get_calculator("dftb")


def test_available_names_every_preset():
    assert available() == ["gfn2", "gfn1", "gpaw", "chgnet", "emt", "lj"]
    assert {"emt", "lj"} <= set(available(installed=True)) <= set(available())


@pytest.mark.parametrize(
    "name, module, install",
    [
        ("gpaw", "gpaw", "CC=g++ pip install gpaw gpaw-data"),
        ("gfn2", "tblite", "pip install tblite"),
        ("chgnet", "chgnet", "pip install 'asebo\\[ml\\]'"),
    ],
)
def test_missing_package_error_gives_the_install_line(monkeypatch, name, module, install):
    for loaded in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, module, None)  # import of it now fails
    with pytest.raises(ImportError, match="is not installed: .*" + install.replace("+", r"\+")):
        get_calculator(name)
    assert name not in available(installed=True)


# vacuum box


def test_box_wrapper_matches_the_isolated_calculator_and_leaves_atoms_alone():
    atoms = perturbed_water()
    atoms.set_cell([2.0, 2.0, 2.0])
    before = atoms.positions.copy()
    wrapped = MoleculeBoxCalculator(EMT(), vacuum=3.0)
    energy, forces = energy_and_forces(atoms, wrapped)
    reference_energy, reference_forces = energy_and_forces(atoms, EMT())
    assert energy == pytest.approx(reference_energy, abs=1e-10)
    np.testing.assert_allclose(forces, reference_forces, atol=1e-10)
    np.testing.assert_array_equal(atoms.positions, before)
    np.testing.assert_array_equal(atoms.cell.lengths(), [2.0, 2.0, 2.0])


def test_box_keeps_vacuum_and_grows_when_an_atom_moves_out():
    wrapped = MoleculeBoxCalculator(EMT(), vacuum=3.0)
    atoms = molecule("H2O")
    boxed = wrapped.boxed(atoms)
    first_box = wrapped.box_.copy()
    assert not boxed.pbc.any()
    np.testing.assert_allclose(boxed.cell.lengths(), first_box)
    assert boxed.positions.min() >= 3.0 - 1e-12
    assert (first_box - boxed.positions).min() >= 3.0 - 1e-12
    atoms.positions[1, 1] += 2.5
    boxed = wrapped.boxed(atoms)
    assert (wrapped.box_ > first_box).any()
    assert boxed.positions.min() >= 3.0 - 1e-12
    assert (wrapped.box_ - boxed.positions).min() >= 3.0 - 1e-12


def test_a_band_box_holds_every_image_with_its_vacuum():
    from calculators.box import band_box

    water = molecule("H2O")
    stretched = water.copy()
    stretched.positions[1] += [0.0, 1.5, 0.3]  # one O-H bond broken
    box = band_box([water.positions, stretched.positions], vacuum=3.0)  # (3,)
    for image in (water, stretched):
        # each image alone gets the box band_box gives for it
        alone = MoleculeBoxCalculator(EMT(), vacuum=3.0)
        alone.boxed(image)
        np.testing.assert_allclose(alone.box_, band_box([image.positions], vacuum=3.0))
        assert (alone.box_ <= box + 1e-12).all()
        shared = MoleculeBoxCalculator(EMT(), vacuum=3.0, box=box)
        boxed = shared.boxed(image)
        np.testing.assert_allclose(shared.box_, box)  # kept: every atom 3 Å from the walls
        assert boxed.positions.min() >= 3.0 - 1e-12
        assert (box - boxed.positions).min() >= 3.0 - 1e-12
    with pytest.raises(ValueError, match="three positive lengths"):
        MoleculeBoxCalculator(EMT(), box=[8.0, -1.0, 8.0])


def test_box_energy_and_forces_are_invariant_under_translation():
    wrapped = MoleculeBoxCalculator(EMT(), vacuum=3.0)
    atoms = perturbed_water()
    energy, forces = energy_and_forces(atoms, wrapped)
    atoms.translate([10.0, -3.0, 0.5])
    moved_energy, moved_forces = energy_and_forces(atoms, wrapped)
    assert moved_energy == pytest.approx(energy, abs=1e-10)
    np.testing.assert_allclose(moved_forces, forces, atol=1e-10)


class AnisotropicTrap(Calculator):
    """A closed form that depends on orientation, as a grid does: each atom in the
    trap ``x^T A x / 2`` of a fixed symmetric ``A``, plus EMT's interaction."""

    implemented_properties = ("energy", "forces")
    stiffness = np.array([[1.0, 0.3, 0.1], [0.3, 2.0, -0.2], [0.1, -0.2, 3.5]])

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        energy, forces = energy_and_forces(self.atoms, EMT())
        centred = self.atoms.positions - self.atoms.get_cell().sum(axis=0) / 2  # (n, 3)
        trapped = centred @ self.stiffness  # (n, 3)
        self.results = {
            "energy": energy + 0.5 * float((trapped * centred).sum()),
            "forces": forces - trapped,
        }


def rotated(atoms, seed):
    rotation = Rotation.random(random_state=seed).as_matrix()
    moved = atoms.copy()
    moved.positions = atoms.positions @ rotation.T + [1.0, -2.0, 0.5]
    return moved, rotation


def test_aligned_box_forces_match_finite_differences_of_its_energy():
    wrapped = MoleculeBoxCalculator(AnisotropicTrap(), vacuum=3.0, align=True)
    energy_and_forces(perturbed_water(seed=1), wrapped)  # the reference orientation
    atoms, _ = rotated(perturbed_water(seed=2, stdev=0.15), seed=3)
    _, forces = energy_and_forces(atoms, wrapped)
    numeric = np.zeros_like(forces)
    h = 1e-5
    for index in np.ndindex(forces.shape):
        shifted = []
        for sign in (1, -1):
            moved = atoms.copy()
            moved.positions[index] += sign * h
            shifted.append(energy_and_forces(moved, wrapped)[0])
        numeric[index] = -(shifted[0] - shifted[1]) / (2 * h)
    np.testing.assert_allclose(forces, numeric, atol=1e-6)


def test_aligned_box_is_invariant_under_rotation_and_its_forces_carry_no_torque():
    atoms = perturbed_water(seed=4, stdev=0.1)
    wrapped = MoleculeBoxCalculator(AnisotropicTrap(), vacuum=3.0, align=True)
    energy, forces = energy_and_forces(atoms, wrapped)
    moved, rotation = rotated(atoms, seed=5)
    moved_energy, moved_forces = energy_and_forces(moved, wrapped)
    assert moved_energy == pytest.approx(energy, abs=1e-10)
    np.testing.assert_allclose(moved_forces, forces @ rotation.T, atol=1e-10)
    centred = moved.positions - moved.positions.mean(axis=0)
    np.testing.assert_allclose(moved_forces.sum(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.cross(centred, moved_forces).sum(axis=0), 0.0, atol=1e-12)
    # without the alignment the trap's torque stays in the forces
    _, unaligned = energy_and_forces(moved, MoleculeBoxCalculator(AnisotropicTrap(), vacuum=3.0))
    assert np.abs(np.cross(centred, unaligned).sum(axis=0)).max() > 0.1


def test_aligned_box_at_its_reference_removes_only_the_torque():
    # where the configuration is its own reference, the alignment's response is the
    # projection of the forces off the rigid rotations
    atoms = perturbed_water(seed=6, stdev=0.1)
    wrapped = MoleculeBoxCalculator(AnisotropicTrap(), vacuum=3.0, align=True)
    _, forces = energy_and_forces(atoms, wrapped)
    _, plain = energy_and_forces(atoms, MoleculeBoxCalculator(AnisotropicTrap(), vacuum=3.0))
    centred = atoms.positions - atoms.positions.mean(axis=0)
    rotations = np.stack([np.cross(axis, centred).ravel() for axis in np.eye(3)], axis=1)
    basis, _ = np.linalg.qr(rotations)  # (3n, 3)
    projected = plain.ravel() - basis @ (basis.T @ plain.ravel())
    np.testing.assert_allclose(forces.ravel(), projected, atol=1e-10)


def test_box_rejects_periodic_atoms():
    atoms = molecule("H2O", vacuum=3.0, pbc=True)
    with pytest.raises(ValueError, match="atoms.pbc = False"):
        energy_and_forces(atoms, MoleculeBoxCalculator(EMT()))


# k-points and periodic cells


@pytest.mark.parametrize("side, density", [(4.0, 3.5), (7.3, 3.5), (25.0, 3.5), (4.05, 1.0)])
def test_kpoint_grid_of_an_orthorhombic_cell_is_the_closed_form(side, density):
    cell = np.diag([side, 2 * side, 3 * side])
    expected = tuple(max(1, int(np.ceil(2 * np.pi * density / length))) for length in np.diag(cell))
    assert kpoint_grid(cell, [True] * 3, density) == expected


def test_kpoint_grid_of_fcc_uses_the_spacing_of_the_lattice_planes():
    # fcc's reciprocal lattice is bcc: |b_i| = sqrt(3) / a for the primitive vectors
    a = 4.05
    cell = bulk("Al", "fcc", a=a).cell
    n = int(np.ceil(2 * np.pi * 3.5 * np.sqrt(3) / a))
    assert kpoint_grid(cell, [True] * 3, 3.5) == (n, n, n) == (10, 10, 10)
    # the same lattice from other vectors (a_1 + a_2, a_2, a_3) has other lattice planes
    other = np.array(cell) @ np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]]).T
    assert abs(np.linalg.det(other)) == pytest.approx(abs(np.linalg.det(cell)))
    reciprocal = np.linalg.inv(other).T
    expected = tuple(int(np.ceil(2 * np.pi * 3.5 * np.linalg.norm(b))) for b in reciprocal)
    assert kpoint_grid(other, [True] * 3, 3.5) == expected


def test_slab_gets_kpoints_only_in_plane_whatever_its_vacuum():
    grids = []
    for vacuum in (3.0, 8.0):
        slab = fcc111("Al", (2, 2, 3), a=4.05, vacuum=vacuum)
        assert list(slab.pbc) == [True, True, False]
        grids.append(kpoint_grid(slab.cell, slab.pbc, 3.5))
    # in-plane lattice planes 2 a / sqrt(2) * sin 60 deg apart
    spacing = 2 * 4.05 / np.sqrt(2) * np.sqrt(3) / 2
    n = int(np.ceil(2 * np.pi * 3.5 / spacing))
    assert grids == [(n, n, 1), (n, n, 1)]
    # fully periodic, a short cell along z gets k-points there too
    assert kpoint_grid(fcc111("Al", (2, 2, 3), a=4.05, vacuum=0.5).cell, [True] * 3, 3.5)[2] > 1


def test_kpoint_numbers_go_along_periodic_axes_only():
    assert kpoint_size(4, [True, True, False]) == (4, 4, 1)
    assert kpoint_size(3, [True] * 3) == (3, 3, 3)
    assert kpoint_size((4, 2, 1), [True, True, False]) == (4, 2, 1)
    with pytest.raises(ValueError, match="3 k-points along z, which is not periodic"):
        kpoint_size((4, 4, 3), [True, True, False])
    for bad in (0, (4, 4), (4, 0, 1), 2.5, "four", True):
        with pytest.raises(ValueError, match="kpts must be"):
            kpoint_size(bad, [True] * 3)
    with pytest.raises(ValueError, match="kdensity must be"):
        kpoint_grid(np.eye(3), [True] * 3, 0.0)


def slab_with_hydrogen(vacuum=3.0):
    slab = fcc100("Al", (1, 1, 2), a=4.05, vacuum=vacuum)
    slab.append("H")
    slab.positions[-1] = slab.positions[1] + [1.43, 0.0, 1.2]
    return slab


def without_vacuum(atoms):
    atoms.cell[2] = 0.0


def periodic_without_vacuum(atoms):
    atoms.pbc = True
    atoms.cell[2] = 0.0


def two_equal_vectors(atoms):
    atoms.cell[1] = atoms.cell[0]


def hydrogen_below_the_cell(atoms):
    atoms.positions[2, 2] = -0.5


def hydrogen_at_the_image_of_atom_1(atoms):
    # 0.316 Å from atom 1's image across the cell boundary along x
    atoms.positions[2] = atoms.positions[1] + [atoms.cell[0, 0] - 0.1, 0.0, 0.3]


@pytest.mark.parametrize(
    "change, message",
    [
        (without_vacuum, "zero volume: give the non-periodic axis z a length"),
        (periodic_without_vacuum, "periodic along z but the cell vector there is zero"),
        (two_equal_vectors, "zero volume .*linearly dependent"),
        (hydrogen_below_the_cell, "atom 2 lies outside the cell along z"),
        (hydrogen_at_the_image_of_atom_1, "atoms 1 and 2 are 0.316 Å apart"),
    ],
)
def test_bad_periodic_cells_are_refused_in_one_line(change, message):
    atoms = slab_with_hydrogen()
    check_periodic_cell(atoms)
    change(atoms)
    with pytest.raises(ValueError, match=message) as error:
        check_periodic_cell(atoms)
    assert "\n" not in str(error.value)


def test_an_atom_next_to_its_own_image_is_refused():
    atoms = Atoms("H", cell=[0.4, 5.0, 5.0], pbc=True)
    with pytest.raises(ValueError, match="atom 0 is 0.400 Å from its own periodic image"):
        check_periodic_cell(atoms)


def test_atoms_close_only_across_the_boundary_are_refused():
    atoms = Atoms("H2", positions=[[0.1, 2, 2], [9.8, 2, 2]], cell=[10, 4, 4], pbc=True)
    with pytest.raises(ValueError, match="atoms 0 and 1 are 0.300 Å apart"):
        check_periodic_cell(atoms)
    atoms.pbc = [False, True, True]  # not across a non-periodic boundary
    check_periodic_cell(atoms)


# GPAW's parameters (no GPAW calculation)


def test_periodic_atoms_get_kpoints_smearing_and_lcao_by_default():
    calc = CellAwareGPAW()
    slab = slab_with_hydrogen()
    parameters = calc.gpaw_parameters_for(slab)
    assert parameters["mode"] == "lcao" and parameters["basis"] == "dzp"
    assert parameters["kpts"] == {"size": kpoint_grid(slab.cell, slab.pbc, 3.5), "gamma": True}
    assert parameters["kpts"]["size"][2] == 1
    assert parameters["occupations"] == {"name": "fermi-dirac", "width": 0.1}
    assert parameters["symmetry"] == {"point_group": False, "time_reversal": True}
    # a molecule keeps the box's parameters: fd, no smearing, no symmetry
    assert calc.gpaw_parameters_for(molecule("H2O")) == {
        "mode": "fd",
        "h": 0.2,
        "xc": "PBE",
        "txt": None,
        "symmetry": "off",
    }


def test_preset_options_reach_gpaws_parameters():
    calc = CellAwareGPAW(mode="pw", ecut=350, kpts=4, width=0.05, xc="LDA", maxiter=50)
    parameters = calc.gpaw_parameters_for(slab_with_hydrogen())
    assert parameters["mode"] == {"name": "pw", "ecut": 350.0}
    assert "h" not in parameters and "basis" not in parameters
    assert parameters["kpts"]["size"] == (4, 4, 1)
    assert parameters["occupations"]["width"] == 0.05
    assert (parameters["xc"], parameters["maxiter"]) == ("LDA", 50)
    assert CellAwareGPAW(kdensity=1.0).gpaw_parameters_for(bulk("Al"))["kpts"]["size"] == (3, 3, 3)
    assert CellAwareGPAW(symmetry="off").gpaw_parameters_for(bulk("Al"))["symmetry"] == "off"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mode": "paw"}, "mode must be one of fd, lcao, pw"),
        ({"ecut": 0}, "ecut must be a plane-wave cutoff"),
        ({"ecut": "high"}, "ecut must be a plane-wave cutoff"),
        ({"kdensity": -1.0}, "kdensity must be"),
        ({"width": -0.1}, "width must be a Fermi-Dirac smearing"),
        ({"kpts": (4, 4)}, "kpts must be"),
        ({"h": 0}, "h must be a grid spacing"),
    ],
)
def test_bad_gpaw_options_are_refused_at_construction(options, message):
    with pytest.raises(ValueError, match=message):
        CellAwareGPAW(**options)


def test_bad_periodic_input_is_refused_before_gpaw_is_built():
    calc = CellAwareGPAW(kpts=(4, 4, 4))
    with pytest.raises(ValueError, match="4 k-points along z, which is not periodic"):
        energy_and_forces(slab_with_hydrogen(), calc)
    flat = slab_with_hydrogen()
    flat.cell[2] = 0.0
    with pytest.raises(ValueError, match="zero volume"):
        energy_and_forces(flat, CellAwareGPAW())
    with pytest.raises(ValueError, match="align=True is for molecules"):
        energy_and_forces(bulk("Al"), CellAwareGPAW(align=True))
    assert calc.gpaw_ is None


def test_stress_needs_plane_waves_and_a_periodic_cell():
    atoms = bulk("Al")
    atoms.calc = CellAwareGPAW()
    with pytest.raises(PropertyNotImplementedError, match="mode='pw'"):
        atoms.get_stress()
    water = molecule("H2O")
    water.calc = CellAwareGPAW(mode="pw")
    with pytest.raises(PropertyNotImplementedError, match="molecule in a vacuum box"):
        water.get_stress()
    assert atoms.calc.gpaw_ is None and water.calc.gpaw_ is None


# counting


def test_counting_gives_the_stress_of_a_cell_filter_without_another_call():
    atoms = bulk("Cu", a=3.7) * (2, 1, 1)
    atoms.rattle(0.05, seed=0)
    atoms.calc = CountingCalculator(EMT())
    forces = FrechetCellFilter(atoms).get_forces()  # (n + 3, 3): atoms' forces, virial
    reference = atoms.copy()
    reference.calc = EMT()
    expected = FrechetCellFilter(reference).get_forces()
    np.testing.assert_allclose(forces, expected, atol=1e-12)
    assert atoms.calc.ncalls == 1
    assert atoms.get_potential_energy(force_consistent=True) == reference.get_potential_energy()
    atoms.positions[0, 0] += 0.01
    atoms.get_forces()
    assert atoms.calc.ncalls == 2


# recorder


def test_recorder_counts_calls_and_stores_each_one(tmp_path):
    db = tmp_path / "calls.db"
    recorder = RecordingCalculator(EMT(), db=db)
    configurations = [perturbed_water(seed=seed) for seed in range(4)]
    results = [energy_and_forces(atoms, recorder) for atoms in configurations]
    assert (recorder.ncalls, recorder.nhits) == (4, 0)
    rows = list(ase.db.connect(db).select(sort="id"))
    assert len(rows) == 4
    for row, atoms, (energy, forces) in zip(rows, configurations, results):
        np.testing.assert_array_equal(row.positions, atoms.positions)
        np.testing.assert_array_equal(row.numbers, atoms.numbers)
        assert row.energy == energy == energy_and_forces(atoms, EMT())[0]
        np.testing.assert_array_equal(row.forces, forces)
        assert row.wall_time > 0
        assert row.calc_key == calculator_key(EMT())


def test_cache_hit_returns_identical_results_without_a_call(tmp_path):
    recorder = RecordingCalculator(EMT(), db=tmp_path / "calls.db")
    atoms = perturbed_water()
    energy, forces = energy_and_forces(atoms, recorder)
    energy_and_forces(perturbed_water(seed=5), recorder)
    almost = atoms.copy()
    almost.positions[0, 0] += 1e-12
    hit_energy, hit_forces = energy_and_forces(almost, recorder)
    assert (recorder.ncalls, recorder.nhits) == (2, 1)
    assert hit_energy == energy
    np.testing.assert_array_equal(hit_forces, forces)
    moved = atoms.copy()
    moved.positions[0, 0] += 1e-8
    energy_and_forces(moved, recorder)
    assert (recorder.ncalls, recorder.nhits) == (3, 1)


def test_cache_distinguishes_cell_and_pbc(tmp_path):
    recorder = RecordingCalculator(EMT(), db=tmp_path / "calls.db")
    atoms = molecule("H2O", vacuum=4.0)
    energy_and_forces(atoms, recorder)
    periodic = atoms.copy()
    periodic.pbc = True
    energy_and_forces(periodic, recorder)
    larger = atoms.copy()
    larger.set_cell(atoms.cell * 1.01)
    energy_and_forces(larger, recorder)
    assert (recorder.ncalls, recorder.nhits) == (3, 0)


def test_rows_persist_for_a_fresh_recorder_of_the_same_calculator(tmp_path):
    db = tmp_path / "calls.db"
    configurations = [perturbed_water(seed=seed) for seed in range(3)]
    first = RecordingCalculator(EMT(), db=str(db))
    results = [energy_and_forces(atoms, first) for atoms in configurations]
    second = RecordingCalculator(EMT(), db=str(db))
    replayed = [energy_and_forces(atoms, second) for atoms in configurations]
    assert (second.ncalls, second.nhits) == (0, 3)
    for (energy, forces), (energy_again, forces_again) in zip(results, replayed):
        assert energy_again == energy
        np.testing.assert_array_equal(forces_again, forces)
    other_method = RecordingCalculator(get_calculator("lj"), db=str(db))
    energy_and_forces(configurations[0], other_method)
    assert (other_method.ncalls, other_method.nhits) == (1, 0)


CHILD = """
import sys
from ase.build import molecule
from ase.calculators.emt import EMT
from calculators import RecordingCalculator

atoms = molecule("H2O")
atoms.calc = RecordingCalculator(EMT(), db=sys.argv[1])
for step in range(1_000_000):
    atoms.positions[1, 0] = 1e-4 * step
    atoms.get_potential_energy()
    print(step, flush=True)
"""


def test_process_killed_mid_sequence_loses_no_stored_row(tmp_path):
    db = tmp_path / "calls.db"
    root = Path(calculators.__file__).resolve().parents[1]
    path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    reported = -1
    try:
        while reported < 19:
            line = child.stdout.readline()
            assert line, child.stderr.read()
            reported = int(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    rows = list(ase.db.connect(db).select(sort="id"))
    assert len(rows) >= reported + 1
    atoms = molecule("H2O")
    for step, row in enumerate(rows):
        atoms.positions[1, 0] = 1e-4 * step
        np.testing.assert_array_equal(row.positions, atoms.positions)
        assert row.energy == energy_and_forces(atoms, EMT())[0]
    replay = RecordingCalculator(EMT(), db=db)
    for step in range(reported + 1):
        atoms.positions[1, 0] = 1e-4 * step
        energy_and_forces(atoms, replay)
    assert (replay.ncalls, replay.nhits) == (0, reported + 1)


@pytest.mark.parametrize("bad", ["energy", "forces"])
def test_non_finite_results_raise_and_are_not_stored(tmp_path, bad):
    db = tmp_path / "calls.db"
    recorder = RecordingCalculator(NonFiniteCalculator(bad), db=db)
    atoms = molecule("H2O")
    for _ in range(2):
        with pytest.raises(ValueError, match="non-finite energy or forces .*nothing was stored"):
            energy_and_forces(atoms, recorder)
    assert (recorder.ncalls, recorder.nhits) == (2, 0)
    assert ase.db.connect(db).count() == 0


def test_failing_calculation_propagates_and_stores_nothing(tmp_path):
    db = tmp_path / "calls.db"
    recorder = RecordingCalculator(get_calculator("gfn2", max_iterations=1), db=db)
    with pytest.raises(CalculationFailed, match="SCF not converged.*nothing was stored"):
        energy_and_forces(perturbed_water(), recorder)
    assert recorder.ncalls == 1
    assert ase.db.connect(db).count() == 0


def test_an_ion_or_another_spin_is_never_answered_with_the_neutral_row(tmp_path):
    # tblite reads the total charge and spin from the initial charges and moments
    recorder = RecordingCalculator(get_calculator("gfn2"), db=tmp_path / "calls.db")
    ammonia = molecule("NH3")
    neutral = energy_and_forces(ammonia, recorder)[0]
    for charges, magmoms in (([1.0, 0, 0, 0], None), ([1.0, 0, 0, 0], [3.0, 0, 0, 0])):
        ion = ammonia.copy()
        ion.set_initial_charges(charges)
        if magmoms is not None:
            ion.set_initial_magnetic_moments(magmoms)
        energy = energy_and_forces(ion, recorder)[0]
        assert energy == pytest.approx(energy_and_forces(ion, get_calculator("gfn2"))[0], abs=1e-6)
        assert abs(energy - neutral) > 1.0
    assert (recorder.ncalls, recorder.nhits) == (3, 0)
    again = RecordingCalculator(get_calculator("gfn2"), db=tmp_path / "calls.db")
    ion.calc = again
    assert ion.get_potential_energy() == energy and again.nhits == 1


def test_a_database_that_cannot_be_read_is_refused_when_the_recorder_is_built(tmp_path):
    # sqlite's own error came at the first call, deep inside ase.db
    for name, content in (("corrupt.db", "this is not sqlite" * 100), ("text.json", "hello")):
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(ValueError, match=f"{name} cannot be read as an ase.db database"):
            RecordingCalculator(EMT(), db=path)
        assert path.read_text() == content


def test_the_key_follows_the_settings_the_calculator_has_at_each_call(tmp_path):
    inner = get_calculator("gfn2")
    recorder = RecordingCalculator(inner, db=tmp_path / "calls.db")
    water = molecule("H2O")
    gfn2 = energy_and_forces(water, recorder)[0]
    inner.set(method="GFN1-xTB")
    gfn1 = energy_and_forces(water, recorder)[0]
    assert gfn1 == pytest.approx(energy_and_forces(water, get_calculator("gfn1"))[0], abs=1e-6)
    assert abs(gfn1 - gfn2) > 1.0 and recorder.nhits == 0


class Smeared(Calculator):
    """A toy with a free energy below its energy and a stress, as GPAW's with smearing."""

    implemented_properties = ("energy", "free_energy", "forces", "stress")

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.results = {
            "energy": 1.0 + float((self.atoms.positions**2).sum()),
            "free_energy": float((self.atoms.positions**2).sum()),
            "forces": -2.0 * self.atoms.positions,
            "stress": np.arange(6.0) * 1e-3,
        }


def test_the_free_energy_and_stress_are_stored_and_replayed(tmp_path):
    atoms = Atoms("Cu2", positions=[[0, 0, 0], [1.2, 0.3, 0.1]], cell=[3, 3, 3], pbc=True)
    recorders = [RecordingCalculator(Smeared(), db=tmp_path / "calls.db") for _ in range(2)]
    for recorder in recorders:  # the second answers from the first's row
        probe = atoms.copy()
        probe.calc = recorder
        assert probe.get_potential_energy(force_consistent=True) == pytest.approx(1.54)
        np.testing.assert_allclose(probe.get_stress(), np.arange(6.0) * 1e-3)
        assert probe.get_potential_energy() == pytest.approx(2.54)
    assert [(r.ncalls, r.nhits) for r in recorders] == [(1, 0), (0, 1)]


def test_recorded_rows_of_another_method_are_refused_as_a_warm_start(tmp_path):
    water = molecule("H2O")
    water.calc = RecordingCalculator(get_calculator("gfn1"), db=tmp_path / "gfn1.db")
    BFGS(water, logfile=None).run(fmax=0.05, steps=2)
    target = molecule("H2O")
    target.calc = get_calculator("gfn2")
    with pytest.raises(ValueError, match="computed by tblite with method='GFN1-xTB'"):
        BOOptimizer(target, observations=str(tmp_path / "gfn1.db"), logfile=None)
    target.calc = get_calculator("gfn1")
    same = BOOptimizer(target, observations=str(tmp_path / "gfn1.db"), logfile=None)
    assert len(same.observations) == water.calc.ncalls


def test_the_counter_calls_again_after_a_failed_call():
    # the copy it computes on was kept before the call: asked again at the same
    # positions, it gave no results (PropertyNotImplementedError)
    class FailsOnce(EMT):
        failed = True  # not yet: the start computes

        def calculate(self, *args, **kwargs):
            if not FailsOnce.failed:
                FailsOnce.failed = True
                raise CalculationFailed("SCF not converged")
            super().calculate(*args, **kwargs)

    atoms = molecule("H2O")
    atoms.calc = CountingCalculator(FailsOnce())
    atoms.get_forces()  # computed once at the start
    atoms.positions[0, 0] += 0.1
    FailsOnce.failed = False
    with pytest.raises(CalculationFailed):
        atoms.get_potential_energy()
    expected = atoms.copy()
    expected.calc = EMT()
    assert atoms.get_potential_energy() == expected.get_potential_energy()
    assert atoms.calc.ncalls == 2 and atoms.calc.wall_time > 0


def test_a_torch_calculator_prior_gives_its_forces_where_gradients_are_off():
    pytest.importorskip("chgnet")
    import torch

    from asebo.model.priors import CalculatorPrior

    atoms = bulk("Cu", cubic=True)
    atoms.rattle(0.05, seed=1)
    prior = CalculatorPrior(get_calculator("chgnet"), atoms)
    positions = atoms.positions[None] + 0.01  # (1, n, 3)
    with torch.no_grad():  # as under a model's prediction
        energies, gradients = prior.energies_and_gradients(positions)
    computed = atoms.copy()
    computed.positions = positions[0]
    computed.calc = get_calculator("chgnet")
    assert energies[0] == pytest.approx(computed.get_potential_energy(), abs=1e-5)
    np.testing.assert_allclose(gradients[0], -computed.get_forces(), atol=1e-5)
    assert gradients.dtype == np.float64


@pytest.mark.parametrize("wrapper", [CountingCalculator, CountedCalls])
def test_the_counting_wrapper_gives_the_forces_of_held_atoms_as_its_calculator_does(wrapper):
    # the optimizers read the forces without the constraints (every atom's gradient);
    # the wrapper's own copy of the atoms must not apply them (the workflow's counter
    # applied them)
    slab = fcc100("Cu", size=(2, 2, 3), vacuum=5.0)
    slab.rattle(0.05, seed=2)
    slab.set_constraint(FixAtoms(indices=[0, 1, 2, 3]))
    slab.calc = wrapper(EMT())
    unconstrained = slab.get_forces(apply_constraint=False)
    reference = slab.copy()
    reference.calc = EMT()
    np.testing.assert_allclose(unconstrained, reference.get_forces(apply_constraint=False))
    assert np.abs(unconstrained[:4]).max() > 1e-3
    assert np.abs(slab.get_forces()[:4]).max() == 0.0
    assert getattr(slab.calc, "ncalls", getattr(slab.calc, "calls", None)) == 1
