"""The random scale on a calculator prior's curvature (asebo.kernels.prior_scale)."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_gp import assert_posterior_gradients_match_finite_differences, samples
from test_metric import rattled
from test_trend import features

from asebo.kernels import CartesianKernel
from asebo.kernels.operators import joint_covariance
from asebo.kernels.prior_scale import PriorCurvature
from asebo.kernels.trend import CovarianceWithTerm, LinearTrend
from asebo.model.gp import CalculatorPrior, EnergyForceGP
from asebo.model.lindh import BEND_CONSTANT, STRETCH_CONSTANT, TORSION_CONSTANT, LindhModel
from asebo.model.metric import InternalMetric

STIFFER = 1.3  # the target's force constants / the prior's


def lindh(atoms, factor=1.0):
    """The Lindh model of ``atoms`` with every force constant times ``factor``."""
    return LindhModel(
        atoms.positions,
        atoms.numbers,
        stretch_constant=factor * STRETCH_CONSTANT,
        bend_constant=factor * BEND_CONSTANT,
        torsion_constant=factor * TORSION_CONSTANT,
    )


def observations(target, atoms, positions):
    """Energies (m,) and forces (m, n, 3) of ``target`` at positions (m, n, 3)."""
    probe = atoms.copy()
    probe.calc = target
    energies, forces = [], []
    for p in positions:
        probe.positions = p
        energies.append(probe.get_potential_energy())
        forces.append(probe.get_forces())
    return np.array(energies), np.array(forces)


@pytest.fixture(scope="module")
def stiffer_ethanol():
    """Ethanol whose target is its Lindh model with force constants 1.3 times the
    prior's: five rattled observations and two configurations further away."""
    atoms = molecule("CH3CH2OH")
    P = rattled("CH3CH2OH", scale=0.04, seed=21, m=5)
    far = rattled("CH3CH2OH", scale=0.12, seed=22, m=2)
    E, F = observations(lindh(atoms, STIFFER), atoms, P)
    E_far, F_far = observations(lindh(atoms, STIFFER), atoms, far)
    return atoms, P, E, F, far, F_far


def gp_on(atoms, prior_curvature, **options):
    model = lindh(atoms)
    return EnergyForceGP(
        kernel="cartesian",
        metric=InternalMetric(model, atoms.positions),
        prior=CalculatorPrior(model, atoms),
        trend=30.0,
        prior_curvature=prior_curvature,
        **options,
    )


def test_structured_products_match_the_dense_rank_one_covariance():
    curvature = PriorCurvature(0.7, -2.0, features(1, 6, 0)[0], 1.5)
    X, Z = features(3, 6, 1), features(4, 6, 2)  # (b, d), (m, d)
    rows = curvature.rows(X, features(3, 1, 3)[:, 0], features(3, 6, 4))  # (3, 7)
    columns = curvature.rows(Z, features(4, 1, 5)[:, 0], features(4, 6, 6))  # (4, 7)
    dense = curvature.dense(rows, columns)  # (21, 28)
    rhs = features(28, 2, 7)
    torch.testing.assert_close(curvature.matmul(rows, columns, rhs), dense @ rhs)
    torch.testing.assert_close(curvature.energy_rows(rows, columns), dense.reshape(3, 7, -1)[:, 0])
    variance, gradient = curvature.prior_variance(rows)
    torch.testing.assert_close(variance, torch.diagonal(curvature.dense(rows, rows))[::7])
    torch.testing.assert_close(gradient, 2 * 0.7 * rows[:, :1] * rows[:, 1:])
    # at the origin (features 0) with the origin's energy and gradient: h = grad h = 0
    zero, energy = torch.zeros(1, 6, dtype=torch.float64), torch.tensor([-2.0], dtype=torch.float64)
    origin = curvature.rows(zero, energy, features(1, 6, 0))
    assert torch.count_nonzero(origin) == 0


def test_covariance_with_a_trend_and_the_scale_is_the_sum_of_the_dense_matrices():
    P = torch.as_tensor(samples("H2O", m=4, seed=1)[1])  # (4, 3, 3)
    op = joint_covariance(P, 2.0, kernel=CartesianKernel())
    U = P.reshape(4, -1) - P[0].reshape(-1)  # (4, 9)
    curvature = PriorCurvature(0.3, 0.0, features(1, 9, 8)[0], 2.0)
    rows = curvature.rows(U, features(4, 1, 9)[:, 0], features(4, 9, 10))  # (4, 10)
    both = CovarianceWithTerm(CovarianceWithTerm(op, LinearTrend(0.4), U), curvature, rows)
    v = features(4 * 10, 1, 11)[:, 0]
    dense = op.to_dense() + LinearTrend(0.4).dense(U, U) + curvature.dense(rows, rows)
    torch.testing.assert_close(both @ v, dense @ v)
    assert both.shape == op.shape


def test_a_stiffer_target_is_learned_everywhere_from_a_few_observations(stiffer_ethanol):
    atoms, P, E, F, far, F_far = stiffer_ethanol
    errors = {}
    for prior_curvature in (0.0, 1.0):
        gp = gp_on(atoms, prior_curvature).fit(P, E, F)
        _, gradient = gp.predict(far, return_gradient=True)
        errors[prior_curvature] = np.abs(gradient + F_far).max()
    # 0.3 of the prior's curvature is all the residual: the scale carries it
    assert errors[1.0] < 0.05 * errors[0.0]


def test_one_observation_leaves_the_mean_as_without_the_scale(stiffer_ethanol):
    # h and its gradient vanish at the lowest-energy observation: one observation
    # says nothing of the scale, which only adds its prior variance c h^2 elsewhere
    atoms, P, E, F, far, _ = stiffer_ethanol
    without = gp_on(atoms, 0.0).fit(P[:1], E[:1], F[:1])
    scaled = gp_on(atoms, 1.0).fit(P[:1], E[:1], F[:1])
    mean, std, gradient = scaled.predict(far, return_std=True, return_gradient=True)
    expected_mean, expected_std, expected_gradient = without.predict(
        far, return_std=True, return_gradient=True
    )
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-12)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=0, atol=1e-12)
    assert (std > expected_std).all()


def test_posterior_gradients_match_finite_differences(stiffer_ethanol):
    atoms, P, E, F, far, _ = stiffer_ethanol
    gp = gp_on(atoms, 1.0).fit(P, E, F)
    assert_posterior_gradients_match_finite_differences(gp, far[0], [(0, 0), (2, 1), (8, 2)])


def test_searched_configurations_leave_no_gradient_maps_behind(stiffer_ethanol):
    # a search evaluates the model at hundreds of configurations per step: the
    # prior's gradients there must leave nothing stored per configuration
    atoms, P, E, F, far, _ = stiffer_ethanol
    gp = gp_on(atoms, 1.0).fit(P, E, F)
    stored = len(gp.metric._mapped)
    gp.predict(far + 0.01, return_std=True, return_gradient=True)
    gp.predict(far - 0.01, return_std=True, return_gradient=True)
    assert len(gp.metric._mapped) == stored


def test_conjugate_gradients_over_every_observation_match_the_dense_solve(stiffer_ethanol):
    atoms, P, E, F, far, _ = stiffer_ethanol
    dense = gp_on(atoms, 1.0, fit_gamma=False, gamma=1.0).fit(P, E, F)
    # 3 of 5 configurations (28 rows each) factorised, CG over all with the scale
    structured = gp_on(
        atoms, 1.0, fit_gamma=False, gamma=1.0, max_size=90, cg_tolerance=1e-10, cg_max_iter=500
    ).fit(P, E, F)
    assert len(structured.selected_) < len(P)
    assert structured.solve_info_.residual <= 1e-10
    mean, gradient = structured.predict(far, return_gradient=True)
    expected_mean, expected_gradient = dense.predict(far, return_gradient=True)
    np.testing.assert_allclose(mean, expected_mean, rtol=0, atol=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=0, atol=1e-5)


@pytest.mark.parametrize("value", [-1.0, True, "1"])
def test_prior_curvature_must_be_a_number_at_least_zero(value):
    with pytest.raises(ValueError, match="prior_curvature"):
        EnergyForceGP(prior_curvature=value)


def test_bo_optimizer_scales_a_prior_calculator_only():
    from asebo.optimize.optimizer import BOOptimizer
    from asebo.optimize.settings import ModelSettings

    atoms = molecule("CH3CH2OH")
    atoms.calc = lindh(atoms, STIFFER)
    atoms.positions = rattled("CH3CH2OH", scale=0.05, seed=23)[0]
    under_calculator = BOOptimizer(atoms, logfile=None, prior=lindh(atoms))
    assert under_calculator.gp.prior_curvature == ModelSettings().prior_curvature
    under_calculator.run(fmax=0.05, steps=2)
    assert under_calculator.gp._curvature is not None
    assert BOOptimizer(atoms, logfile=None).gp.prior_curvature == 0.0
    chosen = BOOptimizer(atoms, logfile=None, prior=lindh(atoms), gp_options={"prior_curvature": 0})
    assert chosen.gp.prior_curvature == chosen.settings.model.prior_curvature == 0
