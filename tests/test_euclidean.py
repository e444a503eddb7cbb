"""Kernels on feature vectors and the squared-distance helper they share."""

import numpy as np
import pytest

from asebo.kernels import GaussianKernel, LaplacianKernel, squared_distances


def points(n, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def test_squared_distances_equal_pairwise_differences():
    X, Y = points(7), points(5, seed=1) * 3.0
    direct = ((X[:, None] - Y[None]) ** 2).sum(-1)  # (7, 5)
    np.testing.assert_allclose(squared_distances(X, Y), direct, rtol=1e-12, atol=1e-12)
    same = squared_distances(X, X)
    assert np.all(same >= 0.0)
    np.testing.assert_allclose(np.diag(same), 0.0, atol=1e-12)


def test_squared_distances_refuse_one_dimensional_input():
    with pytest.raises(ValueError, match=r"expected a 2-D array \(n_samples, n_features\)"):
        squared_distances(np.zeros(3), np.zeros((2, 3)))


def test_laplacian_kernel_is_exp_of_the_l1_distance():
    X, Y = points(6), points(4, seed=2)
    gamma = 0.7
    l1 = np.abs(X[:, None] - Y[None]).sum(-1)  # (6, 4)
    np.testing.assert_allclose(LaplacianKernel(gamma)(X, Y), np.exp(-gamma * l1), rtol=1e-14)
    np.testing.assert_allclose(LaplacianKernel(gamma).diag(X), np.diag(LaplacianKernel(gamma)(X)))
    # heavier tails than the Gaussian of the same gamma beyond unit distance
    far = np.array([[0.0, 0.0, 0.0, 0.0]]), np.array([[2.0, 0.0, 0.0, 0.0]])
    assert LaplacianKernel(1.0)(*far)[0, 0] == pytest.approx(np.exp(-2.0))
    assert LaplacianKernel(1.0)(*far)[0, 0] > GaussianKernel(1.0)(*far)[0, 0]
