"""Maps of a periodic configuration onto itself (asebo.optimize.crystal_symmetry) and the
saddle search that observes each call with its image under the one reversing its mode.

Checked against closed forms (the point groups of the cubic and hexagonal lattices),
EMT's invariance (the energy and turned forces of a configuration's image), and the
finite-difference Hessian at the search's end.
"""

import numpy as np
import pytest
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT

from asebo.benchmarks.hop_saddles import FLAT, HOPS, direction_of_hop, free_curvatures, hop_guess
from asebo.optimize.crystal_symmetry import (
    TOLERANCE,
    crystal_maps,
    lattice_rotations,
    reversing_map,
)
from asebo.optimize.settings import SaddleSettings
from asebo.optimize.subspace import free_atoms
from asebo.optimize.surrogate_model import with_images


def held_atoms(atoms):
    return ~free_atoms(atoms).all(axis=1)


@pytest.mark.parametrize(
    "cell, order",
    [
        (bulk("Cu", cubic=True).cell.array * 2, 48),  # O_h
        (fcc111("Pt", (2, 2, 3), vacuum=6.0).cell.array, 24),  # D_6h of the hexagonal cell
        (np.diag([3.0, 4.0, 5.0]), 8),  # D_2h of an orthorhombic cell
    ],
)
def test_the_lattice_rotations_are_the_point_group_of_the_lattice(cell, order):
    rotations = lattice_rotations(cell)
    assert len(rotations) == order
    assert np.allclose(rotations[0], np.eye(3))
    inverse = np.linalg.inv(cell)
    for rotation in rotations:
        assert np.allclose(rotation @ rotation.T, np.eye(3))
        on_fractions = cell @ rotation.T @ inverse  # the rotated lattice in the lattice's basis
        assert np.allclose(on_fractions, np.round(on_fractions))
    distinct = {tuple(np.round(rotation, 6).ravel()) for rotation in rotations}
    assert len(distinct) == order


@pytest.fixture(scope="module")
def vacancy_hop():
    initial, final = HOPS["cu_vacancy"]()
    return initial, final, hop_guess(initial, final)


def test_a_configuration_and_its_image_have_one_energy_and_turned_forces(vacancy_hop):
    initial, final, guess = vacancy_hop
    held = held_atoms(guess)
    hop = direction_of_hop(initial, final)
    found = reversing_map(guess.positions, guess.numbers, guess.cell.array, held, hop)
    assert found is not None
    assert np.vdot(hop, found.turned(hop)) < -0.9
    atoms = guess.copy()
    atoms.positions += np.random.default_rng(3).normal(scale=0.05, size=atoms.positions.shape)
    atoms.calc = EMT()
    images, image_forces = found.images(atoms.positions[None], atoms.get_forces()[None])
    mirrored = atoms.copy()
    mirrored.positions = images[0]
    mirrored.calc = EMT()
    assert mirrored.get_potential_energy() == pytest.approx(atoms.get_potential_energy(), abs=1e-10)
    assert np.allclose(mirrored.get_forces(), image_forces[0], atol=1e-10)
    # the start is its own image, each atom within the tolerance
    start_image, _ = found.images(guess.positions[None], np.zeros((1, len(guess), 3)))
    assert np.abs(start_image[0] - guess.positions).max() < TOLERANCE


def test_a_hop_between_sites_no_map_exchanges_has_no_reversing_map():
    # fcc to hcp hollow on (111): the two sites are not images of each other
    initial, final = HOPS["pt_pt111"]()
    guess = hop_guess(initial, final)
    held = held_atoms(guess)
    hop = direction_of_hop(initial, final)
    assert reversing_map(guess.positions, guess.numbers, guess.cell.array, held, hop) is None
    for found in crystal_maps(guess.positions, guess.numbers, guess.cell.array, held):
        assert np.all(held[found.permutation] == held)


def test_a_configuration_that_is_its_own_image_adds_no_observation(vacancy_hop):
    initial, final, guess = vacancy_hop
    hop = direction_of_hop(initial, final)
    held = held_atoms(guess)
    found = reversing_map(guess.positions, guess.numbers, guess.cell.array, held, hop)
    moved = guess.positions + 0.1 * hop / np.abs(hop).max()
    positions = np.stack([guess.positions, moved])  # (2, n, 3)
    energies = np.array([-1.0, -0.5])
    forces = np.stack([np.zeros_like(moved), hop])
    taken = with_images((positions, energies, forces), found.as_state())
    assert len(taken[1]) == 3  # the start once, the moved configuration and its image
    assert np.array_equal(taken[0][:2], positions)
    assert taken[1][2] == energies[1]
    expected, expected_forces = found.images(moved[None], hop[None])
    assert np.allclose(taken[0][2], expected[0]) and np.allclose(taken[2][2], expected_forces[0])
    assert with_images((positions, energies, forces), None)[0] is positions


def test_the_search_observes_each_call_with_its_image_and_ends_at_the_hop(vacancy_hop, tmp_path):
    pytest.importorskip("sella")
    from asebo import BOSaddle

    initial, final, guess = vacancy_hop
    atoms = guess.copy()
    atoms.calc = EMT()
    restart = tmp_path / "saddle.json"
    search = BOSaddle(atoms, logfile=None, restart=str(restart))
    assert search.run(fmax=0.05, steps=40)
    assert (free_curvatures(atoms, EMT()) < FLAT).sum() == 1
    state = search.observations.state
    assert "crystal_map" in state
    # the model is the same at a configuration computed and at its image
    found = reversing_map(
        guess.positions, guess.numbers, guess.cell.array, held_atoms(guess), state["start_mode"]
    )
    computed = np.array(search.observations.positions)  # (m, n, 3)
    images, _ = found.images(computed, np.zeros_like(computed))
    gp = search._fitted()
    assert np.allclose(gp.predict(images), gp.predict(computed), atol=1e-5)  # (m,)
    # the restart file names the same map: a resumed search fits the same model
    again = guess.copy()
    again.calc = EMT()
    resumed = BOSaddle(again, logfile=None, restart=str(restart))
    assert np.array_equal(
        resumed.observations.state["crystal_map"]["permutation"],
        state["crystal_map"]["permutation"],
    )
    assert np.allclose(resumed._fitted().predict(images), gp.predict(images), atol=1e-8)


def test_without_crystal_images_the_search_takes_its_calls_alone(vacancy_hop):
    pytest.importorskip("sella")
    from asebo import BOSaddle

    _, _, guess = vacancy_hop
    atoms = guess.copy()
    atoms.calc = EMT()
    search = BOSaddle(atoms, logfile=None, settings=SaddleSettings(crystal_images=False))
    assert search.run(fmax=0.05, steps=40)
    assert "crystal_map" not in search.observations.state
    assert (free_curvatures(atoms, EMT()) < FLAT).sum() == 1
