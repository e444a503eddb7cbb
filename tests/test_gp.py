"""The GP on energies and forces: interpolation, posterior gradients, priors, the LCB."""

from pathlib import Path

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import molecule
from botorch.acquisition import UpperConfidenceBound

from asebo.kernels import CartesianKernel, GaussianKernel, SVDKernel
from asebo.kernels.euclidean import cartesian_rbf_blocks_batched
from asebo.kernels.radial import Matern52
from asebo.kernels.svd import svd_kernel_blocks_batched
from asebo.model.gp import CalculatorPrior, EnergyForceGP
from asebo.optimize.search import (
    SEGMENT_POINTS,
    EnergyModel,
    bound_to_maximise,
    lowest_on_segment,
    minimize_lcb,
)
from calculators import get_calculator


def samples(name="H2O", m=6, scale=0.05, seed=0, calc="gfn2"):
    atoms = molecule(name)
    atoms.calc = get_calculator(calc)
    rng = np.random.default_rng(seed)
    positions, energies, forces = [], [], []
    for _ in range(m):
        atoms.positions = molecule(name).positions + scale * rng.normal(size=(len(atoms), 3))
        positions.append(atoms.get_positions())
        energies.append(atoms.get_potential_energy())
        forces.append(atoms.get_forces())
    return atoms, np.array(positions), np.array(energies), np.array(forces)


@pytest.fixture(scope="module")
def water():
    return samples()


@pytest.fixture(scope="module")
def fitted(water):
    _, P, E, F = water
    return EnergyForceGP(fit_gamma=False, gamma=4.0, prior="mean").fit(P, E, F)


def test_posterior_interpolates_energies_and_forces(water, fitted):
    _, P, E, F = water
    mean, std, gradient = fitted.predict(P, return_std=True, return_gradient=True)
    spread = E.max() - E.min()
    assert np.abs(mean - E).max() < 0.02 * spread
    assert np.abs(gradient + F).max() < 0.05 * np.abs(F).max()
    assert (std < 0.05 * np.sqrt(fitted.outputscale_)).all()


def test_posterior_gradients_match_finite_differences(water, fitted):
    _, P, _, _ = water
    rng = np.random.default_rng(1)
    x = torch.tensor(P[0] + 0.05 * rng.normal(size=P[0].shape), requires_grad=True)
    mean, variance = fitted.posterior(x[None])
    (grad_mean,) = torch.autograd.grad(mean[0], x, retain_graph=True)
    (grad_std,) = torch.autograd.grad(variance[0].sqrt(), x)
    h = 1e-4  # smaller steps drown in the round-off of a well-interpolating posterior
    for a in range(3):
        for i in range(3):
            step = torch.zeros_like(x)
            step[a, i] = h
            with torch.no_grad():
                mp, vp = fitted.posterior((x + step)[None])
                mm, vm = fitted.posterior((x - step)[None])
            assert grad_mean[a, i].item() == pytest.approx(((mp - mm) / (2 * h)).item(), abs=1e-6)
            assert grad_std[a, i].item() == pytest.approx(
                ((vp.sqrt() - vm.sqrt()) / (2 * h)).item(), abs=1e-6
            )


def test_botorch_lcb_is_mean_minus_kappa_sigma(water, fitted):
    _, P, _, _ = water
    kappa = 1.7
    free = torch.ones(9, dtype=torch.bool)
    model = EnergyModel(fitted, torch.tensor(P[0]), free)
    rng = np.random.default_rng(2)
    X = torch.tensor(P[:3].reshape(3, 1, 9) + 0.05 * rng.normal(size=(3, 1, 9)))
    acquisition = UpperConfidenceBound(model, beta=kappa**2, maximize=False)
    mean, variance = fitted.posterior(X.reshape(3, 3, 3))
    expected = mean - kappa * variance.sqrt()
    torch.testing.assert_close(-acquisition(X), expected, atol=0, rtol=1e-10)


@pytest.mark.parametrize("kappa", [1.7, 0.0, -1.3])
def test_the_search_maximises_minus_mean_plus_kappa_sigma_for_either_sign(water, fitted, kappa):
    """A negative kappa adds the uncertainty to the mean (the pessimistic bound), as a
    positive one takes it off; both through the posterior the GP gives directly."""
    _, P, _, _ = water
    free = torch.ones(9, dtype=torch.bool)
    model = EnergyModel(fitted, torch.tensor(P[0]), free)
    rng = np.random.default_rng(4)
    X = torch.tensor(P[:3].reshape(3, 1, 9) + 0.05 * rng.normal(size=(3, 1, 9)))
    mean, variance = fitted.posterior(X.reshape(3, 3, 3))
    expected = mean - kappa * variance.sqrt()
    torch.testing.assert_close(-bound_to_maximise(model, kappa)(X), expected, atol=0, rtol=1e-10)


def test_a_pessimistic_search_steps_where_the_model_is_surer(water, fitted):
    """From the same start in the same box, the search of ``mu + sigma`` ends where the
    model is surer than where the search of ``mu - sigma`` ends; each ends lower by
    its own bound than the other's end."""
    _, P, E, _ = water
    centre = torch.tensor(P[int(np.argmin(E))])
    free = torch.ones(9, dtype=torch.bool)
    ends = {
        kappa: minimize_lcb(fitted, centre[None], centre, 0.1, free, kappa=kappa)[0]
        for kappa in (1.0, -1.0)
    }
    mean, variance = fitted.posterior(torch.stack([ends[1.0], ends[-1.0]]))
    std = variance.sqrt()
    assert std[1] < std[0]
    assert mean[1] + std[1] <= mean[0] + std[0] + 1e-9
    assert mean[0] - std[0] <= mean[1] - std[1] + 1e-9


def test_corrections_add_their_curvature_along_each_direction(water, fitted):
    """The mean gains ``sum_j a_j ((x - c) . d_j)^2 / 2`` and the variance nothing; a
    search given a stiff curvature along the direction of its own step no longer moves
    that way, and still descends along the others."""
    _, P, E, _ = water
    centre = torch.tensor(P[int(np.argmin(E))])
    free = torch.ones(9, dtype=torch.bool)
    rng = np.random.default_rng(3)
    directions = rng.normal(size=(2, 9))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    curvatures = np.array([0.7, 2.5])
    corrections = (torch.tensor(directions), torch.tensor(curvatures))
    X = torch.tensor(P[:3].reshape(3, 1, 9) + 0.05 * rng.normal(size=(3, 1, 9)))
    plain = EnergyModel(fitted, centre, free).posterior(X)
    corrected = EnergyModel(fitted, centre, free, corrections=corrections).posterior(X)
    along = (X.reshape(3, 9) - centre.reshape(9)).numpy() @ directions.T  # (3, 2)
    expected = plain.mean.reshape(3).numpy() + 0.5 * along**2 @ curvatures
    np.testing.assert_allclose(corrected.mean.reshape(3).numpy(), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(corrected.variance, plain.variance, atol=0, rtol=0)

    start = centre[None].clone()
    step = (minimize_lcb(fitted, start, centre, 0.1, free, kappa=0.1)[0] - centre).reshape(9)
    direction = (step / step.norm())[None]  # (1, 9)
    stiff = (direction, torch.tensor([1e4]))
    found, _ = minimize_lcb(fitted, start, centre, 0.1, free, kappa=0.1, corrections=stiff)
    moved = (found - centre).reshape(9)
    assert abs(float(moved @ direction[0])) < 1e-3 * float(step.norm())
    assert fitted.predict(found.numpy()[None])[0] < fitted.predict(centre.numpy()[None])[0]


def test_a_repeated_search_starts_where_the_corrected_bound_is_lowest_on_the_segment(water, fitted):
    """The start after a refused direction is the lowest of the corrected bound on the
    line from the centre to the refused end: the end itself where nothing is added, and
    the centre where a stiff curvature is added along the whole segment."""
    _, P, E, _ = water
    centre = P[int(np.argmin(E))]
    free = torch.ones(9, dtype=torch.bool)
    end = minimize_lcb(fitted, torch.tensor(centre[None]), torch.tensor(centre), 0.1, free, 0.1)
    end = end[0].numpy()
    step = (end - centre).reshape(9)
    direction = step / np.linalg.norm(step)
    line = centre + np.linspace(0.0, 1.0, SEGMENT_POINTS)[:, None, None] * (end - centre)
    mean, std = fitted.predict(line, return_std=True)
    for curvature in (0.0, 0.3, 1e4):
        bound = (
            mean
            + 0.5 * curvature * (np.linspace(0.0, 1.0, SEGMENT_POINTS) ** 2) * (step @ step)
            - 0.1 * std
        )
        start = lowest_on_segment(fitted, centre, end, 0.1, ([direction], [curvature]))
        np.testing.assert_allclose(start, line[int(np.argmin(bound))], atol=1e-12)
    assert np.allclose(lowest_on_segment(fitted, centre, end, 0.1, ([direction], [0.0])), end)
    assert np.allclose(lowest_on_segment(fitted, centre, end, 0.1, ([direction], [1e4])), centre)


def test_the_lcb_search_ends_where_it_ends_for_any_reference_of_the_energy(water):
    """L-BFGS-B stops on a relative change of the bound; measured from the model's
    energy at the centre, that stop is the same for total energies of any size."""
    _, P, E, F = water
    centre = torch.tensor(P[int(np.argmin(E))])
    starts = torch.tensor(P[:2] + 0.02)
    free = torch.ones(9, dtype=torch.bool)
    found = []
    for reference in (0.0, 1e5):
        gp = EnergyForceGP(fit_gamma=False, gamma=4.0, prior="mean").fit(P, E + reference, F)
        positions, lcb = minimize_lcb(gp, starts, centre, 0.1, free, kappa=0.1)
        found.append((positions.numpy(), lcb - reference))
    np.testing.assert_allclose(found[1][0], found[0][0], atol=1e-7)
    assert found[1][1] == pytest.approx(found[0][1], abs=1e-8)


def test_marginal_likelihood_picks_gamma_inside_bounds_and_beats_the_ends(water):
    _, P, E, F = water
    gp = EnergyForceGP(prior="mean", gamma_bounds=(0.05, 50.0)).fit(P, E, F)
    y = gp._targets(E, -F, *gp._prior_at_observations(P, E))
    everything = torch.arange(len(P))
    best = gp._profile_nll(np.log(gp.gamma_), everything, y)
    for gamma in (0.05, 0.5, 5.0, 50.0):
        assert best <= gp._profile_nll(np.log(gamma), everything, y) + 1e-9


def test_calculator_prior_equal_to_the_target_is_reproduced_exactly(water):
    atoms, P, E, F = water
    prior = CalculatorPrior(get_calculator("gfn2"), atoms)
    gp = EnergyForceGP(fit_gamma=False, prior=prior).fit(P, E, F)
    new = P[0] + 0.1
    reference = atoms.copy()
    reference.calc = get_calculator("gfn2")
    reference.positions = new
    mean, gradient = gp.predict(new, return_gradient=True)
    assert mean == pytest.approx(reference.get_potential_energy(), abs=1e-6)
    # tblite's SCF converges each call to about 1e-5 eV/Å in the forces
    np.testing.assert_allclose(gradient, -reference.get_forces(), atol=2e-4)


def test_calculator_prior_keeps_the_latest_configurations_and_recomputes_the_rest():
    atoms, P, _, _ = samples("H2O", m=4, scale=0.05, seed=5)
    prior = CalculatorPrior(get_calculator("gfn2"), atoms, cache_size=2)
    first = prior.energy_and_forces(P[0])
    prior.energy_and_forces(P[1])
    prior.energy_and_forces(P[0])  # asked again: the most recent now, no call
    prior.energy_and_forces(P[2])  # drops P[1], the least recently asked
    assert prior.ncalls == 3 and len(prior._cache) == 2
    prior.energy_and_forces(P[0])
    assert prior.ncalls == 3
    prior.energy_and_forces(P[1])
    assert prior.ncalls == 4
    again = CalculatorPrior(get_calculator("gfn2"), atoms, cache_size=0).energy_and_forces(P[0])
    assert again[0] == pytest.approx(first[0], abs=1e-8)
    np.testing.assert_allclose(again[1], first[1], atol=1e-6)


def test_delta_learning_beats_a_constant_prior_away_from_the_data():
    atoms, P, E, F = samples("CH3OH", m=5, scale=0.05, seed=3)
    _, P_test, E_test, _ = samples("CH3OH", m=5, scale=0.1, seed=4)
    prior = CalculatorPrior(get_calculator("gfn1"), atoms)
    delta = EnergyForceGP(prior=prior).fit(P, E, F).predict(P_test)
    constant = EnergyForceGP(prior="mean").fit(P, E, F).predict(P_test)
    assert np.abs(delta - E_test).mean() < 0.5 * np.abs(constant - E_test).mean()


def test_calculator_prior_offset_does_not_change_the_model():
    # DFT and xTB energies differ by hundreds of eV: shifting every target energy by
    # such a constant must shift the posterior mean and leave all else unchanged
    atoms, P, E, F = samples("CH3OH", m=5, scale=0.05, seed=3)
    _, P_test, _, _ = samples("CH3OH", m=3, scale=0.1, seed=4)
    prior = CalculatorPrior(get_calculator("gfn1"), atoms)
    near = EnergyForceGP(prior=prior).fit(P, E, F)
    far = EnergyForceGP(prior=prior).fit(P, E + 300.0, F)
    assert far.gamma_ == pytest.approx(near.gamma_, rel=1e-9)
    mean_near, std_near = near.predict(P_test, return_std=True)
    mean_far, std_far = far.predict(P_test, return_std=True)
    np.testing.assert_allclose(mean_far - 300.0, mean_near, rtol=0, atol=1e-8)
    np.testing.assert_allclose(std_far, std_near, rtol=1e-8)


def test_gp_interpolates_a_recorded_gpaw_relaxation_with_a_gfn2_prior():
    # 25 observations of a BOOptimizer run on ethanol (GPAW PBE LCAO, GFN2-xTB prior,
    # examples/gpaw_compare.py start 4): the first lies 5.4 eV above the rest, the last
    # 15 within 5 meV of each other. The latest ones alone favour the longest length
    # scale, at which the improper kernel over all 25 is indefinite; with the jitter
    # that needed, the mean missed the observed energies by 15 meV and the run crawled
    path = Path(__file__).parent / "data" / "ethanol_gpaw_bo_path.npz"
    data = np.load(path)
    P, E, F = data["positions"], data["energies"], data["forces"]
    atoms = Atoms(numbers=data["numbers"], positions=P[0])
    gp = EnergyForceGP(prior=CalculatorPrior(get_calculator("gfn2"), atoms)).fit(P, E, F)
    assert gp.jitter_ <= gp.energy_noise**2
    # the last 15: energies relative to the lowest, to a tenth of their spread
    relative_mean = gp.predict(P[10:]) - gp.predict(P[10:]).min()
    relative_observed = E[10:] - E[10:].min()
    assert np.abs(relative_mean - relative_observed).max() < 5e-4


def test_refitting_with_more_data_reuses_the_structure_and_matches_a_fresh_fit(water):
    _, P, E, F = water
    grown = EnergyForceGP(prior="mean").fit(P[:3], E[:3], F[:3])
    structure = grown._structure
    grown.fit(P, E, F)
    fresh = EnergyForceGP(prior="mean").fit(P, E, F)
    assert grown._structure is structure and len(structure) == len(P)
    assert grown.gamma_ == fresh.gamma_
    new = P + 0.03
    np.testing.assert_allclose(grown.predict(new), fresh.predict(new), rtol=0, atol=1e-10)


def test_repeated_configurations_stay_finite(water):
    _, P, E, F = water
    P2, E2, F2 = np.concatenate([P, P[:2]]), np.concatenate([E, E[:2]]), np.concatenate([F, F[:2]])
    gp = EnergyForceGP(prior="max", energy_noise=0.0, gradient_noise=0.0).fit(P2, E2, F2)
    mean, std = gp.predict(P2 + 0.01, return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    assert gp.jitter_ > 0  # the singular covariance was detected and regularised


def test_cartesian_kernel_gp_interpolates(water):
    _, P, E, F = water
    gp = EnergyForceGP(kernel="cartesian", fit_gamma=False, gamma=4.0, prior="mean").fit(P, E, F)
    assert np.abs(gp.predict(P) - E).max() < 0.05 * (E.max() - E.min())


def test_bad_observations_are_refused(water):
    _, P, E, F = water
    bad = F.copy()
    bad[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        EnergyForceGP().fit(P, E, bad)
    with pytest.raises(ValueError, match="expected energies"):
        EnergyForceGP().fit(P, E[:-1], F)
    with pytest.raises(ValueError, match="kernel must be"):
        EnergyForceGP(kernel="matern")


def test_the_kernel_is_an_object_or_the_name_of_one_with_its_options():
    assert EnergyForceGP().kernel.proper and isinstance(EnergyForceGP().kernel, SVDKernel)
    named = EnergyForceGP(kernel="svd", proper=False, radial="matern52").kernel
    assert isinstance(named, SVDKernel) and not named.proper
    assert isinstance(named.radial, Matern52)
    kernel = CartesianKernel(radial="matern52")
    assert EnergyForceGP(kernel=kernel).kernel is kernel
    with pytest.raises(ValueError, match=r"radial belong to the kernel object: pass Cartesian"):
        EnergyForceGP(kernel=kernel, radial="se")
    with pytest.raises(ValueError, match=r"proper belong to the kernel object: pass SVDKernel"):
        EnergyForceGP(kernel=SVDKernel(), proper=False)
    with pytest.raises(ValueError, match="takes no proper"):  # the Cartesian kernel aligns nothing
        EnergyForceGP(kernel="cartesian", proper=True)
    with pytest.raises(TypeError, match=r"SVDKernel\(proper=True\) or CartesianKernel"):
        EnergyForceGP(kernel=GaussianKernel())


def test_a_kernel_object_and_its_name_give_the_same_posterior(water):
    _, P, E, F = water
    options = {"prior": "mean", "fit_gamma": False, "gamma": 2.0}
    named = EnergyForceGP(kernel="svd", proper=False, radial="matern52", **options)
    made = EnergyForceGP(kernel=SVDKernel(gamma=40.0, proper=False, radial=Matern52()), **options)
    x = P[1] + 0.02
    expected = named.fit(P, E, F).predict(x, return_std=True, return_gradient=True)
    for got, want in zip(made.fit(P, E, F).predict(x, True, True), expected):
        np.testing.assert_array_equal(got, want)  # the object's own gamma is not used
    squared_exponential = EnergyForceGP(kernel=SVDKernel(proper=False), **options).fit(P, E, F)
    assert squared_exponential.predict(x) != pytest.approx(expected[0], abs=1e-6)


def dense_posterior(gp, P, E, F, x, select=None):
    """Mean, variance and mean gradient at x (n, 3) from the dense joint covariance.

    Built from the kernel's per-pair derivative blocks, conditioned on the
    configurations ``select`` (all by default), with the GP's fitted ``gamma``,
    noise, jitter and prior; the gradient by autograd through the kernel blocks.
    """
    from test_operators import reference_dense

    m, n = len(P), P.shape[1]
    select = np.arange(m) if select is None else np.asarray(select)
    prior_e, prior_g = gp._prior_at_observations(P, E)
    y = gp._targets(E, -F, prior_e, prior_g).reshape(m, -1)[select].reshape(-1)
    K = reference_dense(P[select], P[select], gp.gamma_, gp.kernel)
    K.diagonal().add_(gp._noise(len(select), n, gp.gamma_))
    K.diagonal().add_(gp.jitter_ * K.diagonal().mean())
    alpha = torch.linalg.solve(K, y)
    xt = torch.tensor(x, requires_grad=True)
    if isinstance(gp.kernel, SVDKernel):
        k, _, dk_dZ = svd_kernel_blocks_batched(
            xt[None], torch.as_tensor(P[select]), gp.gamma_, gp.kernel.proper, second=False
        )
    else:
        k, _, dk_dZ, _ = cartesian_rbf_blocks_batched(
            xt[None], torch.as_tensor(P[select]), gp.gamma_
        )
    c = torch.cat([k[0, :, None], dk_dZ[0].reshape(len(select), -1)], dim=1).reshape(-1)
    mean = c @ alpha
    (gradient,) = torch.autograd.grad(mean, xt)
    c = c.detach()
    variance = gp.outputscale_ * (1.0 - c @ torch.linalg.solve(K, c))
    return mean.item() + gp.prior_offset_, variance.item(), gradient.numpy()


@pytest.mark.parametrize(
    "kernel", [SVDKernel(proper=True), SVDKernel(proper=False), CartesianKernel()], ids=repr
)
@pytest.mark.parametrize("max_size", [10_000, 40])
def test_structured_posterior_equals_the_dense_one(kernel, max_size):
    # max_size 40 holds two of the seven configurations: the mean then comes from
    # conjugate gradients over all seven, the variance from the two nearest the best
    atoms, P, E, F = samples("CH3OH", m=7, scale=0.05, seed=5)
    gp = EnergyForceGP(
        kernel=kernel,
        fit_gamma=False,
        gamma=3.0,
        prior="mean",
        energy_noise=0.05,
        gradient_noise=0.05,
        max_size=max_size,
        cg_tolerance=1e-11,
        cg_max_iter=2000,
    ).fit(P, E, F)
    assert (gp.solve_info_ is None) == (max_size > 7 * 19)
    if max_size < 7 * 19:  # the weights of all seven came from CG, converged
        assert gp.solve_info_.method == "cg" and gp.solve_info_.residual <= 1e-11
    x = P[2] + 0.04 * np.random.default_rng(6).normal(size=P[2].shape)
    mean, std, gradient = gp.predict(x, return_std=True, return_gradient=True)
    dense_mean, _, dense_gradient = dense_posterior(gp, P, E, F, x)
    _, dense_variance, _ = dense_posterior(gp, P, E, F, x, gp.selected_.numpy())
    assert mean == pytest.approx(dense_mean, rel=1e-8)
    np.testing.assert_allclose(
        gradient, dense_gradient, rtol=1e-8, atol=1e-8 * np.abs(dense_gradient).max()
    )
    assert std**2 == pytest.approx(dense_variance, rel=1e-8)
    if max_size < 7 * 19:
        assert len(gp.selected_) == 2
        # conditioning on fewer observations can only widen the posterior
        _, full_variance, _ = dense_posterior(gp, P, E, F, x)
        assert std**2 >= full_variance


@pytest.mark.parametrize("centre", [None, [2, 4]])
def test_beyond_max_size_the_gp_conditions_on_the_configurations_nearest_its_centre(centre):
    # max_size 60 holds three of the seven configurations of 19 rows; without CG the
    # mean, like the variance, conditions on them alone
    atoms, P, E, F = samples("CH3OH", m=7, scale=0.05, seed=5)
    gp = EnergyForceGP(fit_gamma=False, gamma=3.0, prior="mean", max_size=60, cg_max_iter=0).fit(
        P, E, F, centre=centre
    )
    kept = set(gp.selected_.tolist())
    expected = {int(np.argmin(E))} if centre is None else set(centre)
    assert len(kept) == 3 and expected | {6} <= kept  # the latest always stays
    x = P[3] + 0.04 * np.random.default_rng(6).normal(size=P[3].shape)
    mean, std, gradient = gp.predict(x, return_std=True, return_gradient=True)
    dense_mean, dense_variance, dense_gradient = dense_posterior(
        gp, P, E, F, x, gp.selected_.numpy()
    )
    assert mean == pytest.approx(dense_mean, rel=1e-8)
    np.testing.assert_allclose(
        gradient, dense_gradient, rtol=1e-8, atol=1e-8 * np.abs(dense_gradient).max()
    )
    assert std**2 == pytest.approx(dense_variance, rel=1e-8)


def test_posterior_variance_gradient_matches_finite_differences_on_the_cg_path():
    atoms, P, E, F = samples("CH3OH", m=7, scale=0.05, seed=5)
    gp = EnergyForceGP(
        fit_gamma=False,
        gamma=3.0,
        prior="mean",
        max_size=60,
        energy_noise=0.05,
        gradient_noise=0.05,
    ).fit(P, E, F)
    assert gp.solve_info_.method == "cg"
    assert_posterior_gradients_match_finite_differences(gp, P[3] + 0.03, [(0, 0), (2, 1), (5, 2)])


def assert_posterior_gradients_match_finite_differences(gp, x, coordinates, h=1e-5):
    """The autograd gradients of ``gp.posterior``'s mean and variance at ``x`` (n, 3)
    against central differences along the (atom, axis) ``coordinates``."""
    x = torch.tensor(x, requires_grad=True)
    mean, variance = gp.posterior(x[None])
    (grad_mean,) = torch.autograd.grad(mean.sum(), x, retain_graph=True)
    (grad_variance,) = torch.autograd.grad(variance.sum(), x)
    for atom, axis in coordinates:
        step = torch.zeros_like(x)
        step[atom, axis] = h
        with torch.no_grad():
            mp, vp = gp.posterior((x + step)[None])
            mm, vm = gp.posterior((x - step)[None])
        assert grad_mean[atom, axis].item() == pytest.approx(((mp - mm) / (2 * h)).item(), abs=1e-6)
        assert grad_variance[atom, axis].item() == pytest.approx(
            ((vp - vm) / (2 * h)).item(), abs=1e-6 * gp.outputscale_
        )
