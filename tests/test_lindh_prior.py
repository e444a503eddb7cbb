"""The recentred Lindh prior: which bends are taken as straight, and the replay."""

import numpy as np
import pytest
from ase.collections import g2

from asebo.model.lindh import LindhModel
from asebo.model.priors import RecentredLindh


def straightened(name):
    """Reference angles (degrees) the prior moved to 180 on the rattled molecule."""
    atoms = g2[name]
    atoms.rattle(0.1, seed=0)
    prior = RecentredLindh(atoms, recentre=0.3)
    prior.for_observations(atoms.positions[None], np.array([0.0]))
    plain = LindhModel(atoms.positions, atoms.numbers).reference_angles
    moved = prior.model.reference_angles != plain
    assert np.all(prior.model.reference_angles[moved] == np.pi)
    return sorted(np.degrees(plain[moved]).round(1))


@pytest.mark.parametrize(
    "name, angles",
    [
        ("C2H2", [160.1, 173.2]),
        ("CO2", [173.9]),
        ("CH3CN", [162.5]),
        ("H2CCO", [162.7]),
        ("C3H4_D2d", [174.7]),
        # the ring carbons of methylenecyclopropane have three bonds: their 152-155 degree
        # bends are real; furan's wide angles are between atoms not bonded
        ("methylenecyclopropane", []),
        ("C4H4O", []),
        ("H2O", []),
    ],
)
def test_only_wide_bends_of_two_coordinated_atoms_are_straightened(name, angles):
    assert straightened(name) == angles


def test_the_model_is_rebuilt_around_the_best_observation_once_far_from_its_minimum():
    atoms = g2["H2O"]
    first = atoms.positions.copy()
    stretched = first.copy()
    stretched[1] += 0.3 * (first[1] - first[0])  # an O-H bond 30 % longer
    positions, energies = np.array([stretched, first]), np.array([0.0, -1.0])
    away = LindhModel(stretched, atoms.numbers).energy_and_forces(first)[0]
    assert away > 0.3  # the relaxed geometry is far up the model around the start
    prior = RecentredLindh(atoms, recentre=0.3)
    prior.for_observations(positions, energies)
    assert prior.centre == 1
    np.testing.assert_array_equal(prior.model.reference, first)
    kept = RecentredLindh(atoms, recentre=away + 0.1)
    kept.for_observations(positions, energies)
    assert kept.centre == 0
