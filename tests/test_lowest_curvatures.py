"""The lowest curvatures and the Newton decrement from Hessian products
(asebo.optimize.lowest_curvatures) against the whole Hessian's eigendecomposition."""

import numpy as np
import pytest
from ase.build import molecule

from asebo import BOOptimizer
from asebo.benchmarks._symmetric_starts import symmetric_saddle
from asebo.model.priors import resolve_prior
from asebo.optimize.lowest_curvatures import RESIDUAL, LowestSubspace
from asebo.optimize.model_hessian import internal_basis
from calculators import get_calculator


class CountedProducts:
    """Products with an explicit symmetric matrix, counted."""

    def __init__(self, matrix):
        self.matrix, self.count = matrix, 0

    def __call__(self, vectors):
        self.count += vectors.shape[1]
        return self.matrix @ vectors


def spectrum(curvatures, seed=0):
    """A symmetric matrix with the given eigenvalues and random eigenvectors, and a
    positive definite preconditioner near it (each eigenvalue's size off by up to 2x)."""
    rng = np.random.default_rng(seed)
    vectors = np.linalg.qr(rng.normal(size=(len(curvatures), len(curvatures))))[0]
    matrix = vectors @ np.diag(curvatures) @ vectors.T
    scale = np.exp(rng.uniform(-0.7, 0.7, size=len(curvatures)))
    near = vectors @ np.diag(np.abs(curvatures) * scale + 0.05) @ vectors.T
    return matrix, near


def converged(subspace):
    while subspace.grow():
        pass
    curvatures, vectors = subspace.ritz()
    return curvatures, vectors


@pytest.mark.parametrize("lowest", [[0.02, 0.05], [-0.3, -0.01, 0.04]])
def test_the_subspace_finds_every_non_positive_curvature_and_the_newton_decrement(lowest):
    k = 60
    stiff = np.geomspace(0.1, 40.0, k - len(lowest))
    exact = np.concatenate([lowest, stiff])
    matrix, near = spectrum(exact)
    gradient = np.random.default_rng(1).normal(scale=0.02, size=k)
    products = CountedProducts(matrix)
    subspace = LowestSubspace(products, near, gradient)
    curvatures, vectors = converged(subspace)
    wanted = subspace.wanted(curvatures)
    assert wanted == sum(np.array(lowest) <= 0) + 1
    values, modes = np.linalg.eigh(matrix)
    np.testing.assert_allclose(curvatures[:wanted], values[:wanted], atol=RESIDUAL**2 / 0.01)
    overlaps = np.abs(np.sum(vectors[:, :wanted] * modes[:, :wanted], axis=0))
    assert np.all(overlaps > 0.99)
    along = modes.T @ gradient
    positive = values > 0
    exact_drop = 0.5 * np.sum(along[positive] ** 2 / values[positive])
    drop, _ = subspace.newton(curvatures, vectors)
    assert drop == pytest.approx(exact_drop, abs=2e-4)
    assert products.count < k / 2  # far below the whole Hessian's k products


def test_in_the_whole_space_the_ritz_pairs_are_the_hessians_own():
    exact = np.array([-0.2, 0.01, 0.3, 1.0, 5.0, 20.0])
    matrix, _ = spectrum(exact, seed=2)
    subspace = LowestSubspace(CountedProducts(matrix), np.eye(6), np.ones(6))
    subspace.extend(np.eye(6))
    assert subspace.full
    curvatures, _ = subspace.ritz()
    np.testing.assert_allclose(curvatures, exact, atol=1e-12)
    assert not subspace.grow()


def relaxed_under_a_prior_calculator(atoms, steps=50):
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None, prior=resolve_prior("gfn1"))
    optimizer.run(fmax=0.05, steps=steps)
    return optimizer


def both_curvatures(optimizer):
    engine, observations = optimizer.engine, optimizer.observations
    here = np.array(observations.positions[-1])
    measure = engine.lowest_curvatures(observations, here)
    assert measure is not None
    calls = engine.prior.ncalls
    _, lowest = engine.curvature_at(observations, here, False, measure=measure)
    lowest_calls = engine.prior.ncalls - calls
    _, whole = engine.curvature_at(observations, here, False)
    return lowest, whole, lowest_calls, here


def test_at_a_minimum_under_a_prior_calculator_the_lowest_mode_and_drop_are_the_whole_hessians():
    optimizer = relaxed_under_a_prior_calculator(molecule("CH3CH2OCH3"))
    lowest, whole, calls, here = both_curvatures(optimizer)
    assert len(lowest.curvatures) == 1 and lowest.curvatures[0] > 0
    assert lowest.curvatures[0] == pytest.approx(whole.curvatures[0], abs=2e-3)
    assert abs(lowest.modes[0] @ whole.modes[0]) > 0.99
    gradient = -np.asarray(optimizer.observations.forces[-1])
    assert lowest.quadratic_drop(gradient) == pytest.approx(
        whole.quadratic_drop(gradient), abs=2e-4
    )
    f = internal_basis(here, np.ones(here.shape, dtype=bool)).shape[1]
    assert calls < 2 * f  # the whole Hessian's central differences: 2 prior calls a column
    with pytest.raises(ValueError, match="one gradient"):
        lowest.quadratic_drop(gradient + 0.01)
    # elsewhere than the latest configuration the drop would read other forces: the
    # whole Hessian is taken there
    engine, observations = optimizer.engine, optimizer.observations
    assert len(observations) > 1
    assert engine.lowest_curvatures(observations, np.array(observations.positions[0])) is None


def test_at_an_eclipsed_saddle_the_negative_curvature_is_found_as_the_whole_hessian_has_it():
    atoms = symmetric_saddle("C2H6", 6)
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None, prior=resolve_prior("gfn1"))
    optimizer.run(fmax=0.05, steps=0)
    lowest, whole, _, here = both_curvatures(optimizer)
    negative = int(np.sum(whole.curvatures < 0))
    assert negative >= 1
    assert len(lowest.curvatures) == negative + 1
    np.testing.assert_allclose(lowest.curvatures, whole.curvatures[: negative + 1], atol=5e-3)
    basis = internal_basis(here, np.ones(here.shape, dtype=bool))
    np.testing.assert_allclose(
        lowest.projected(basis[:, :5]), whole.projected(basis[:, :5]), atol=5e-3
    )
