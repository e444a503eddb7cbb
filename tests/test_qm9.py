"""Tests of the QM9 loader on the data shipped with qm9pack."""

import numpy as np
import pytest
from ase.units import Hartree, kcal, mol

from asebo.learn.qm9 import ATOMIC_REFERENCE_U0, HARTREE_TO_KCAL_PER_MOL, QM9, load_qm9


@pytest.fixture(scope="module")
def qm9():
    return load_qm9()


def test_full_set_sorted_and_cached(qm9):
    assert len(qm9) == 130_831
    assert np.all(np.diff(qm9.ids) > 0)
    assert load_qm9() is qm9


def test_methane_first_molecule(qm9):
    methane = qm9.subset([0])
    assert methane.ids[0] == 1 and methane.smiles[0] == "C"
    assert list(methane.numbers[0]) == [6, 1, 1, 1, 1]
    ch = np.linalg.norm(methane.positions[0][1:] - methane.positions[0][0], axis=1)
    np.testing.assert_allclose(ch, 1.0919, atol=2e-3)  # B3LYP C-H bond length, Angstrom
    assert methane.u0[0] == pytest.approx(-40.47893)
    expected = -40.47893 - ATOMIC_REFERENCE_U0[6] - 4 * ATOMIC_REFERENCE_U0[1]
    assert methane.atomization_energy[0] == pytest.approx(expected, abs=1e-9)
    assert methane.atomization_energy[0] * HARTREE_TO_KCAL_PER_MOL == pytest.approx(-396.0, abs=0.1)
    assert methane.homo_lumo_gap[0] == pytest.approx(0.5048)


def test_unit_conversion_matches_ase():
    assert HARTREE_TO_KCAL_PER_MOL == pytest.approx(Hartree / (kcal / mol))
    assert HARTREE_TO_KCAL_PER_MOL == pytest.approx(627.5095, abs=1e-3)


def test_sample_is_reproducible_and_consistent(qm9):
    first = qm9.sample(300, random_state=7)
    second = qm9.sample(300, random_state=7)
    np.testing.assert_array_equal(first.ids, second.ids)
    assert len(set(first.ids.tolist())) == 300
    assert isinstance(first, QM9)
    for numbers, positions, frequencies in zip(first.numbers, first.positions, first.frequencies):
        assert positions.shape == (len(numbers), 3)
        assert len(frequencies) in (3 * len(numbers) - 6, 3 * len(numbers) - 5)
        assert np.all(np.isin(numbers, list(ATOMIC_REFERENCE_U0)))
    assert np.all(first.atomization_energy < 0)
    assert np.all((first.homo_lumo_gap > 0) & (first.homo_lumo_gap < 1))
    np.testing.assert_array_equal(first.n_atoms, [len(z) for z in first.numbers])


def test_linear_molecule_and_doubled_frequency_rows(qm9):
    acetylene = qm9.subset([3])
    assert acetylene.smiles[0] == "C#C"
    assert len(acetylene.frequencies[0]) == 3 * 4 - 5
    position = int(np.searchsorted(qm9.ids, 1354))  # its row lists the 45 modes twice
    molecule = qm9.subset([position])
    assert molecule.n_atoms[0] == 17
    assert len(molecule.frequencies[0]) == 45
    assert molecule.frequencies[0][0] == pytest.approx(50.5607)


def test_stoichiometry_agrees_with_smiles(qm9):
    rdkit = pytest.importorskip("rdkit.Chem")
    sample = qm9.sample(50, random_state=3)
    for smiles, numbers in zip(sample.smiles, sample.numbers):
        molecule = rdkit.AddHs(rdkit.MolFromSmiles(smiles))
        from_smiles = sorted(atom.GetAtomicNum() for atom in molecule.GetAtoms())
        assert from_smiles == sorted(numbers.tolist())


def test_to_atoms(qm9):
    atoms = qm9.subset([2]).to_atoms(0)
    assert atoms.get_chemical_formula() == "H2O"
    assert not atoms.pbc.any()


def test_arrays_are_read_only(qm9):
    with pytest.raises(ValueError):
        qm9.u0[0] = 0.0
    with pytest.raises(ValueError):
        qm9.subset([0]).positions[0][0, 0] = 1.0


@pytest.mark.parametrize("indices", [[130_831], [-1], [0.5]])
def test_bad_indices_raise(qm9, indices):
    with pytest.raises(ValueError):
        qm9.subset(indices)


def test_sample_too_large_raises(qm9):
    with pytest.raises(ValueError, match="cannot sample"):
        qm9.subset([0, 1]).sample(3)
