"""The search's preconditioned box coordinates: the map, its preconditioner, the Lindh
model's Gauss-Newton Hessian, and the search through them."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_gp import samples

from asebo.model.gp import EnergyForceGP
from asebo.model.lindh import LindhModel
from asebo.model.metric import EIGENVALUE_FLOOR, HessianMetric, InternalMetric, model_hessian
from asebo.optimize.preconditioning import (
    BoxCoordinates,
    metric_preconditioner,
    preconditioner,
)
from asebo.optimize.search import minimize_lcb


def lindh(name="CH3CH2OH"):
    atoms = molecule(name)
    return atoms, LindhModel(atoms.positions, atoms.numbers, out_of_plane_constant=0.05)


def test_gauss_newton_hessian_is_the_models_hessian_at_its_reference():
    atoms, model = lindh()
    exact = model_hessian(model, atoms.positions)  # central differences of the gradient
    np.testing.assert_allclose(
        model.gauss_newton_hessian(atoms.positions), exact, atol=1e-5 * np.abs(exact).max()
    )


def test_gauss_newton_hessian_is_positive_semidefinite_away_from_the_reference():
    atoms, model = lindh()
    rattled = atoms.positions + 0.1 * np.random.default_rng(0).normal(size=(len(atoms), 3))
    assert np.linalg.eigvalsh(model_hessian(model, rattled)).min() < -0.1  # the model's own
    hessian = model.gauss_newton_hessian(rattled)
    np.testing.assert_allclose(hessian, hessian.T)
    assert np.linalg.eigvalsh(hessian).min() > -1e-10 * np.abs(hessian).max()


def test_preconditioner_whitens_the_hessian_above_the_floor():
    rng = np.random.default_rng(1)
    vectors = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    values = np.array([-1.0, 0.0, 1e-4, 0.5, 3.0, 40.0])
    hessian = (vectors * values) @ vectors.T
    transform, inverse = preconditioner(hessian)
    np.testing.assert_allclose(transform @ inverse, np.eye(6), atol=1e-10)
    floored = np.clip(values, EIGENVALUE_FLOOR * values.max(), None)
    whitened = transform @ ((vectors * floored) @ vectors.T) @ transform
    np.testing.assert_allclose(whitened, np.eye(6), atol=1e-10)


def test_box_coordinates_stay_in_the_box_and_invert_inside_it():
    rng = np.random.default_rng(2)
    centre, radius = torch.tensor(rng.normal(size=5)), 0.2
    transform, inverse = preconditioner(np.diag([0.3, 1.0, 2.0, 10.0, 50.0]))
    box = BoxCoordinates(centre, radius, transform, inverse)
    far = box.to_box(torch.tensor(rng.normal(scale=1e3, size=(10, 5))))
    assert ((far - centre).abs() <= radius * (1 + 1e-12)).all()
    inside = centre + radius * torch.tensor(rng.uniform(-0.9, 0.9, size=(10, 5)))
    torch.testing.assert_close(box.to_box(box.from_box(inside)), inside)
    beyond = centre + torch.tensor([3.0, -3.0, 0.0, 0.0, 1.0]) * radius
    expected = centre + torch.tensor([0.98, -0.98, 0.0, 0.0, 0.98]) * radius
    torch.testing.assert_close(box.to_box(box.from_box(beyond)), expected)


def test_box_coordinates_are_the_preconditioned_step_to_first_order():
    transform, inverse = preconditioner(np.array([[4.0, 1.0], [1.0, 9.0]]))
    box = BoxCoordinates(torch.zeros(2, dtype=torch.float64), 0.3, transform, inverse)
    jacobian = torch.autograd.functional.jacobian(box.to_box, torch.zeros(2, dtype=torch.float64))
    np.testing.assert_allclose(jacobian.numpy(), transform, atol=1e-12)


def test_an_internal_coordinate_metric_preconditions_with_its_models_hessian():
    atoms, model = lindh()
    free = np.ones((len(atoms), 3), dtype=bool)
    free[0] = False
    metric = InternalMetric.from_model(model, atoms.positions)
    transform, _ = metric_preconditioner(metric, atoms.positions, free)
    expected, _ = preconditioner(model.gauss_newton_hessian(atoms.positions)[3:, 3:])
    np.testing.assert_allclose(transform, expected)
    assert metric_preconditioner(None, atoms.positions, free) is None
    aligned = HessianMetric.from_model(model, atoms.positions)
    assert metric_preconditioner(aligned, atoms.positions, free) is None


@pytest.fixture(scope="module")
def water_gp():
    atoms, P, E, F = samples(m=5, seed=3)
    gp = EnergyForceGP(fit_gamma=False, gamma=4.0, prior="mean").fit(P, E, F)
    return gp, P[int(np.argmin(E))], LindhModel(molecule("H2O").positions, atoms.numbers)


@pytest.mark.parametrize("radius", [0.3, 0.01])
def test_the_preconditioned_search_ends_at_the_boxs_lowest_bound(water_gp, radius):
    # a box wide enough to hold the bound's minimum, and one whose faces hold it: the
    # search in the box's coordinates ends where the search within bounds ends
    gp, centre, model = water_gp
    free = torch.ones(9, dtype=torch.bool)
    start = torch.tensor(centre)[None]
    plain, plain_lcb = minimize_lcb(gp, start, torch.tensor(centre), radius, free, 0.1, 500, 1e-12)
    scaled, scaled_lcb = minimize_lcb(
        gp,
        start,
        torch.tensor(centre),
        radius,
        free,
        0.1,
        500,
        1e-12,
        preconditioner(model.gauss_newton_hessian(centre)),
    )
    assert (np.abs(scaled.numpy() - centre) <= radius * (1 + 1e-12)).all()
    assert scaled_lcb == pytest.approx(plain_lcb, abs=1e-6)
    # the bound is invariant under rigid motions: its minimum is a shape
    np.testing.assert_allclose(distances(scaled.numpy()), distances(plain.numpy()), atol=2e-3)


def distances(positions):
    return np.linalg.norm(positions[:, None] - positions[None], axis=-1)
