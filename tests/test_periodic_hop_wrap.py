"""An adatom that hops half a lattice vector of a small cell (Au on Al(100) in a 2x2
cell, ASE's NEB tutorial): the pair springs and the periodic features follow it
continuously, a wrap by a whole lattice vector still changes nothing, and a band's GP
follows EMT along the hop."""

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.mep import NEB

from asebo import BONEB
from asebo.benchmarks.neb import au_on_al100, idpp_band
from asebo.commands._band_plot import model_profile
from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.periodic import PeriodicMetric
from asebo.model.springs import ExpSprings


def _hop(points=41):
    """The hop's endpoints and the straight path (points, n, 3) between them."""
    initial, final, _ = au_on_al100()
    fractions = np.linspace(0.0, 1.0, points)[:, None, None]
    return initial, final, (1 - fractions) * initial.positions + fractions * final.positions


def test_the_springs_energy_is_continuous_along_a_half_cell_hop_and_wrap_invariant():
    initial, final, path = _hop()
    springs = ExpSprings(initial)
    energies = np.array([springs.energy_forces_stress(p, initial.cell)[0] for p in path])
    # the springs stretch smoothly as the adatom moves 0.07 Å a point: the second
    # differences stay small, where a spring taken to another image would jump by eV
    assert np.abs(np.diff(energies, 2)).max() < 0.05
    middle = path[16]  # 0.4 of the way: the adatom 0.2 lattice vectors along
    wrapped = middle.copy()
    wrapped[-1] -= initial.cell[0]  # the adatom written one lattice vector back
    energy = springs.energy_forces_stress(middle, initial.cell)[0]
    assert springs.energy_forces_stress(wrapped, initial.cell)[0] == pytest.approx(
        energy, rel=1e-12
    )


def test_the_features_are_continuous_along_a_half_cell_hop_and_wrap_invariant():
    initial, final, path = _hop()
    coordinates = GeneralizedCoordinates.from_optimizable(initial)
    springs = ExpSprings(coordinates.configuration(initial.positions))
    metric = PeriodicMetric.from_model(springs, coordinates, initial.positions)
    features = metric.features(path).reshape(len(path), -1).numpy()  # (points, r)
    steps = np.linalg.norm(np.diff(features, axis=0), axis=1)
    assert steps.max() < 3 * np.median(steps)  # a steady pace, no lattice vector's jump
    middle = path[16]  # 0.4 of the way: the adatom 0.2 lattice vectors along
    wrapped = middle.copy()
    wrapped[-1] -= initial.cell[0]
    both = metric.features(np.stack([middle, wrapped])).reshape(2, -1)
    np.testing.assert_allclose(both[0], both[1], atol=1e-12)


def test_a_bands_model_follows_emt_along_the_half_cell_hop():
    initial, final, moving = au_on_al100()
    images = [initial]
    for positions in idpp_band(initial, final, moving)[1:-1]:
        image = initial.copy()
        image.positions = positions
        images.append(image)
    images.append(final)
    for image in images:
        image.calc = EMT()
    band = NEB(images, climb=True, method="improvedtangent")
    optimizer = BONEB(band, logfile=None)
    assert optimizer.run(fmax=0.05, steps=40)
    optimizer.band_state()
    path = np.concatenate(
        [[0.0], np.cumsum(np.linalg.norm(np.diff(optimizer.positions, axis=0), axis=(1, 2)))]
    )
    s, model = model_profile(optimizer, path)
    reference = []
    for where in np.interp(s, path, np.arange(len(path))):
        lower = min(int(where), len(images) - 2)
        weight = where - lower
        probe = initial.copy()
        probe.positions = (1 - weight) * images[lower].positions + weight * images[
            lower + 1
        ].positions
        probe.calc = EMT()
        reference.append(probe.get_potential_energy())
    # between and at the images the GP's energy is EMT's to a few tens of meV
    assert np.abs(model - np.array(reference)).max() < 0.05
