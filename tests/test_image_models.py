"""The GP of each image of a band: one for all calls while they fit the dense covariance,
beyond it one per image conditioned on the calls nearest its own latest."""

import numpy as np
import pytest
from ase import Atoms

from asebo import BONEB
from asebo.model.gp import EnergyForceGP
from asebo.neb.image_models import ImageModels
from calculators.muller_brown import MINIMUM_A, MINIMUM_B, SADDLE_AB, MullerBrown
from tests.test_neb import SCALE, muller_brown_band

ROWS = 4  # covariance rows of one configuration of one atom: the energy and 3 forces


def muller_brown_calls(images=5, per_image=3, seed=0):
    """Calls spread over the images of the straight Müller-Brown band: ``per_image``
    near each image's place, image by image in turn; positions (m, 1, 3), energies (m,),
    forces (m, 1, 3), and the image of each call (m,)."""
    rng = np.random.default_rng(seed)
    places = np.linspace(MINIMUM_A, MINIMUM_B, images + 2)[1:-1]  # (images, 2)
    positions, owners = [], []
    for _ in range(per_image):
        for image, place in enumerate(places, start=1):
            positions.append([[*(place + 0.05 * rng.standard_normal(2)), 0.0]])
            owners.append(image)
    positions = np.array(positions)
    calculator = MullerBrown(scale=SCALE)
    energies, forces = [], []
    for where in positions:
        atoms = Atoms("H", positions=where, calculator=calculator)
        energies.append(atoms.get_potential_energy())
        forces.append(atoms.get_forces())
    return positions, np.array(energies), np.array(forces), np.array(owners)


def fitted_models(max_size, calls):
    positions, energies, forces, owners = calls
    latest = {int(image): int(np.flatnonzero(owners == image)[-1]) for image in set(owners)}
    gp = EnergyForceGP(kernel="cartesian", max_size=max_size, prior=float(energies.max()))
    gp.fit(positions, energies, forces, centre=sorted(latest.values()))
    models = ImageModels(gp, len(latest) + 2)
    models.condition(len(energies), latest)
    return models, latest


def largest_force_error(gp, positions, forces):
    _, gradients = gp.predict(positions, return_gradient=True)
    return float(np.abs(forces + np.asarray(gradients)).max())


def test_every_image_takes_the_gp_of_all_calls_while_they_fit_its_dense_covariance():
    calls = muller_brown_calls()
    positions, energies, forces, _ = calls
    size = ROWS * len(energies)
    models, _ = fitted_models(size, calls)
    assert all(models.of(image) is models.pooled for image in range(7))
    prior = float(energies.max())
    alone = EnergyForceGP(kernel="cartesian", max_size=size, prior=prior)
    alone.fit(positions, energies, forces)
    queries = positions[:7] + 0.02
    np.testing.assert_allclose(
        models.predict(queries, range(7)), alone.predict(queries), rtol=1e-10, atol=1e-12
    )


def test_beyond_the_dense_covariance_each_image_takes_the_gp_of_the_calls_nearest_its_own():
    calls = muller_brown_calls()
    positions, energies, forces, owners = calls
    models, latest = fitted_models(ROWS * 4, calls)  # four configurations of fifteen
    last = len(energies) - 1  # the latest call, which every GP keeps
    queries = positions + 0.01
    for image, at in latest.items():
        distance = np.linalg.norm(positions - positions[at], axis=(1, 2))
        distance[last] = -1.0
        near = np.sort(np.argsort(distance)[:4])  # (4,)
        reference = EnergyForceGP(
            kernel="cartesian",
            gamma=models.pooled.gamma_,
            fit_gamma=False,
            prior=float(energies.max()),
            max_size=ROWS * 4,
        ).fit(positions[near], energies[near], forces[near])
        own = models.of(image)
        for got, expected in zip(
            own.predict(queries, return_gradient=True),
            reference.predict(queries, return_gradient=True),
        ):
            np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)
        mine = owners == image
        assert largest_force_error(own, positions[mine], forces[mine]) < largest_force_error(
            models.pooled, positions[mine], forces[mine]
        )
    stacked = models.predict(queries, owners, return_gradient=True)[1]
    for where, image, gradient in zip(queries, owners, stacked):
        expected = models.of(image).predict(where[None], return_gradient=True)[1][0]
        np.testing.assert_array_equal(gradient, expected)


@pytest.mark.parametrize("max_size", [ROWS * 4, ROWS * 8])
def test_a_band_of_image_gps_reaches_the_muller_brown_saddle(max_size):
    neb = muller_brown_band()
    optimizer = BONEB(neb, logfile=None, gp_options={"max_size": max_size})
    assert optimizer.run(fmax=0.05, steps=100)
    assert len(optimizer.record.observations) * ROWS > max_size  # beyond one dense GP
    energies = [image.get_potential_energy() for image in neb.images]
    top = int(np.argmax(energies))
    assert np.linalg.norm(neb.images[top].positions[0, :2] - SADDLE_AB) < 0.01
    assert energies[top] / SCALE == pytest.approx(-40.665, abs=0.05)


def test_a_gp_conditioned_near_some_calls_leaves_the_gp_of_all_calls_as_it_was():
    positions, energies, forces, _ = muller_brown_calls()
    gp = EnergyForceGP(kernel="cartesian", max_size=ROWS * 4)
    gp.fit(positions, energies, forces, centre=[len(energies) - 1])
    queries = positions + 0.01
    before = gp.predict(queries, return_std=True, return_gradient=True)
    local = gp.conditioned_near([0])
    assert 0 in local.selected_.tolist() and 0 not in gp.selected_.tolist()
    for got, expected in zip(gp.predict(queries, return_std=True, return_gradient=True), before):
        np.testing.assert_array_equal(got, expected)
