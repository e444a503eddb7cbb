"""The recentred Lindh prior: which bends are taken as straight, and the replay."""

import numpy as np
import pytest
from ase.collections import g2

from asebo.model.lindh import LindhModel
from asebo.model.priors import RecentredLindh


def moved_references(name):
    """The reference angles (degrees) the prior moved on the rattled molecule: those
    moved to 180 (a straight two-coordinated atom) and those moved to 0 (a bend folded
    across such an atom, at an end bonded to it), each as the plain model had them."""
    atoms = g2[name]
    atoms.rattle(0.1, seed=0)
    prior = RecentredLindh(atoms, recentre=0.3)
    prior.for_observations(atoms.positions[None], np.array([0.0]))
    plain = LindhModel(atoms.positions, atoms.numbers).reference_angles
    reference = prior.model.reference_angles
    moved = reference != plain
    straight = moved & (reference == np.pi)
    folded = moved & (reference == 0.0)
    assert np.all(straight | folded | ~moved)
    return sorted(np.degrees(plain[straight]).round(1)), np.degrees(plain[folded])


@pytest.mark.parametrize(
    "name, angles, folded",
    [
        ("C2H2", [160.1, 173.2], 0),
        ("CO2", [173.9], 2),
        ("CH3CN", [162.5], 2),
        ("H2CCO", [162.7], 2),
        ("C3H4_D2d", [174.7], 2),
        # the ring carbons of methylenecyclopropane have three bonds: their 152-155 degree
        # bends are real; furan's wide angles are between atoms not bonded
        ("methylenecyclopropane", [], 0),
        ("C4H4O", [], 0),
        ("H2O", [], 0),
    ],
)
def test_only_wide_bends_of_two_coordinated_atoms_are_straightened(name, angles, folded):
    straight, folded_angles = moved_references(name)
    assert straight == angles
    # one folded bend at each end of a straight atom, nearly shut
    assert len(folded_angles) == folded
    assert np.all(folded_angles < 180.0 - 150.0)


def stretched_water():
    """Water and two observations: one O-H bond 30 % longer (energy 0), then the
    molecule as relaxed (-1 eV); positions (2, 3, 3), energies (2,)."""
    atoms = g2["H2O"]
    first = atoms.positions.copy()
    stretched = first.copy()
    stretched[1] += 0.3 * (first[1] - first[0])
    return atoms, np.array([stretched, first]), np.array([0.0, -1.0])


def test_the_model_is_rebuilt_around_the_best_observation_once_far_from_its_minimum():
    atoms, positions, energies = stretched_water()
    stretched, first = positions
    away = LindhModel(stretched, atoms.numbers).energy_and_forces(first)[0]
    assert away > 0.3  # the relaxed geometry is far up the model around the start
    prior = RecentredLindh(atoms, recentre=0.3)
    prior.for_observations(positions, energies)
    assert prior.centre == 1
    np.testing.assert_array_equal(prior.model.reference, first)
    kept = RecentredLindh(atoms, recentre=away + 0.1)
    kept.for_observations(positions, energies)
    assert kept.centre == 0


def test_a_prior_chosen_by_the_forces_keeps_the_model_that_fits_them():
    atoms, positions, energies = stretched_water()
    first = positions[1]
    start_model = RecentredLindh(atoms, recentre=np.inf).for_observations(positions, energies)
    rebuilt = RecentredLindh(atoms, recentre=0.3).for_observations(positions, energies)
    grid = positions + np.array([0.0, 0.05])[:, None, None]  # (2, n, 3)
    for fitting, other in ((start_model, rebuilt), (rebuilt, start_model)):
        forces = -fitting.energies_and_gradients(positions)[1]  # (2, n, 3)
        rule = RecentredLindh(atoms, recentre=0.3, prior_by_forces=True)
        prior = rule.for_observations(positions, energies, forces)
        centre, model = rule.metric_reference()
        assert centre == 1  # the metric's model follows the run either way
        np.testing.assert_array_equal(model.reference, first)
        chosen = prior.energies_and_gradients(grid)[0]
        np.testing.assert_allclose(chosen, fitting.energies_and_gradients(grid)[0], atol=1e-12)
        assert abs(chosen - other.energies_and_gradients(grid)[0]).max() > 0.1
    with pytest.raises(ValueError, match="forces"):
        RecentredLindh(atoms, recentre=0.3, prior_by_forces=True).for_observations(
            positions, energies
        )
