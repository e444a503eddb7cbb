"""Tests of asebo.learn.diffusion: diffusion maps and the kernel PCA beside them.

Diffusion maps: Coifman and Lafon (2006), in the form of the blog post "Scaling Kernel
Embeddings, Pt. 1" (2025).
"""

import numpy as np
import pytest
import scipy.linalg
from sklearn.decomposition import KernelPCA
from sklearn.neighbors import kneighbors_graph
from sklearn.utils.estimator_checks import parametrize_with_checks

from asebo.kernels import CartesianKernel, GaussianKernel, LinearKernel, SVDKernel, TanimotoKernel
from asebo.learn.diffusion import (
    EPSILON_NEIGHBORS,
    DiffusionMap,
    KernelPCAEmbedding,
    median_knn_epsilon,
)


def interval_sample(n, skew, seed):
    """n points of [0, 1] with density proportional to exp(skew x) (uniform for 0)."""
    u = np.random.default_rng(seed).random(n)
    return u if skew == 0 else np.log1p(u * np.expm1(skew)) / skew


def circle_sample(n, amplitude, seed):
    """Angles with density proportional to 1 + amplitude cos(theta), by rejection."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.0, 2.0 * np.pi, 8 * n)
    keep = rng.random(8 * n) * (1.0 + amplitude) < 1.0 + amplitude * np.cos(theta)
    return theta[keep][:n]


def eigenfunctions(dm):
    """psi = embedding / eigenvalue^t, the right eigenvectors of the Markov matrix."""
    return dm.embedding_ / dm.eigenvalues_**dm.t


def aligned(Z, reference):
    """Z with each column's sign matched to the reference (eigenvectors have no sign)."""
    return Z * np.sign(np.sum(Z * reference, axis=0))


def reference_diffusion_map(A, alpha, t, k):
    """The blog post's algorithm on a dense affinity matrix, written out with numpy.

    Returns the coordinates lambda^t psi with psi = D^{-1/2} u normalised to
    sum_i pi_i psi_i^2 = 1, the eigenvalues, and the stationary distribution pi.
    """
    q = A.sum(axis=1)
    A = A / np.outer(q**alpha, q**alpha)
    d = A.sum(axis=1)
    n = len(A)
    values, u = scipy.linalg.eigh(A / np.sqrt(np.outer(d, d)), subset_by_index=[n - k - 1, n - 1])
    values, u = values[::-1][1:], u[:, ::-1][:, 1:]
    psi = u / np.sqrt(d / d.sum())[:, None]
    return psi * values**t, values, d / d.sum()


# Laplace-Beltrami eigenfunctions whatever the sampling density (Coifman & Lafon 2006)


@pytest.mark.parametrize("skew", [0.0, 3.0])
def test_alpha_one_recovers_neumann_cosines_on_interval(skew):
    x = interval_sample(800, skew, seed=1)
    dm = DiffusionMap(n_components=3, alpha=1.0, epsilon=0.004).fit(x[:, None])
    psi = eigenfunctions(dm)
    for k in range(3):
        cosine = np.sqrt(2.0) * np.cos((k + 1) * np.pi * x)  # unit norm on [0, 1]
        error = aligned(psi[:, [k]], cosine[:, None])[:, 0] - cosine
        assert np.sqrt(np.mean(error**2)) < 0.2
    log_ratios = np.log(dm.eigenvalues_) / np.log(dm.eigenvalues_[0])
    np.testing.assert_allclose(log_ratios, [1.0, 4.0, 9.0], rtol=0.08)


def test_alpha_zero_follows_the_sampling_density():
    x = interval_sample(800, 3.0, seed=1)
    dm = DiffusionMap(n_components=3, alpha=0.0, epsilon=0.004).fit(x[:, None])
    psi = eigenfunctions(dm)
    cosine = np.sqrt(2.0) * np.cos(np.pi * x)
    error = aligned(psi[:, [0]], cosine[:, None])[:, 0] - cosine
    assert np.sqrt(np.mean(error**2)) > 1.0
    log_ratios = np.log(dm.eigenvalues_) / np.log(dm.eigenvalues_[0])
    assert abs(log_ratios[2] - 9.0) > 2.0


@pytest.mark.parametrize("alpha, recovered", [(1.0, True), (0.0, False)])
def test_circle_harmonics_under_nonuniform_sampling(alpha, recovered):
    theta = circle_sample(1000, 0.6, seed=0)
    X = np.column_stack([np.cos(theta), np.sin(theta)])
    dm = DiffusionMap(n_components=4, alpha=alpha, epsilon=0.02).fit(X)
    psi = eigenfunctions(dm)
    errors = []
    for pair, frequency in ((slice(0, 2), 1), (slice(2, 4), 2)):
        harmonics = np.sqrt(2.0) * np.column_stack(
            [np.cos(frequency * theta), np.sin(frequency * theta)]
        )
        coefficients = np.linalg.lstsq(psi[:, pair], harmonics, rcond=None)[0]
        errors.append(np.abs(psi[:, pair] @ coefficients - harmonics).max())
        if recovered:  # a rotation: the degenerate pair spans (cos, sin), unit norms
            np.testing.assert_allclose(np.linalg.svd(coefficients)[1], 1.0, atol=0.05)
    log_ratios = np.log(dm.eigenvalues_) / np.log(dm.eigenvalues_[0])
    if recovered:
        assert errors[0] < 0.15 and errors[1] < 0.3
        np.testing.assert_allclose(log_ratios, [1.0, 1.0, 4.0, 4.0], rtol=0.08)
    else:
        assert errors[0] > 0.5
        assert log_ratios[1] > 1.1


# agreement with a plain implementation of the blog post's algorithm


@pytest.mark.parametrize("alpha, t", [(0.0, 1), (0.5, 2), (1.0, 0.5)])
def test_dense_matches_reference_implementation(alpha, t):
    X = np.random.default_rng(0).normal(size=(150, 3))
    dm = DiffusionMap(n_components=3, alpha=alpha, t=t, epsilon=2.0).fit(X)
    A = GaussianKernel(gamma=0.5)(X)
    expected, values, pi = reference_diffusion_map(A, alpha, t, 3)
    np.testing.assert_allclose(dm.eigenvalues_, values, rtol=1e-10)
    np.testing.assert_allclose(aligned(dm.embedding_, expected), expected, atol=1e-8)
    psi = eigenfunctions(dm)
    np.testing.assert_allclose(psi.T @ (pi[:, None] * psi), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(pi @ psi, 0.0, atol=1e-10)  # orthogonal to constants


def test_sparse_graph_matches_reference_knn_graph():
    X = np.random.default_rng(1).normal(size=(200, 2))
    dm = DiffusionMap(n_components=3, alpha=0.5, epsilon=0.5, n_neighbors=8).fit(X)
    expected, values, _ = knn_reference(X, 0.5, 8, 0.5, 3)
    np.testing.assert_allclose(dm.eigenvalues_, values, rtol=1e-10)
    np.testing.assert_allclose(aligned(dm.embedding_, expected), expected, atol=1e-8)


def test_t_scales_coordinates_by_eigenvalue_powers():
    X = np.random.default_rng(2).normal(size=(120, 2))
    base = DiffusionMap(n_components=3, t=0, epsilon=1.0).fit(X)
    later = DiffusionMap(n_components=3, t=3, epsilon=1.0).fit(X)
    np.testing.assert_allclose(later.embedding_, base.embedding_ * base.eigenvalues_**3, atol=1e-12)


# out-of-sample extension, sparse, landmarks


@pytest.mark.parametrize(
    "params", [{}, {"n_neighbors": 12}, {"n_landmarks": 60}], ids=["dense", "sparse", "landmarks"]
)
def test_transform_of_training_points_reproduces_embedding(params):
    X = np.random.default_rng(3).normal(size=(250, 3))
    dm = DiffusionMap(n_components=4, alpha=0.7, t=2, random_state=0, **params).fit(X)
    np.testing.assert_allclose(dm.transform(X), dm.embedding_, atol=1e-10)


def test_nystrom_extension_interpolates_between_training_points():
    """New points land on the eigenfunctions: the 1/lambda factor is needed here, as
    the third eigenvalue is about 1/3."""
    x = interval_sample(1000, 3.0, seed=0)
    dm = DiffusionMap(n_components=3, epsilon=0.05).fit(x[:, None])
    assert dm.eigenvalues_[2] < 0.4
    new = np.linspace(0.01, 0.99, 50)
    order = np.argsort(x)
    interpolated = np.column_stack(
        [np.interp(new, x[order], dm.embedding_[order, k]) for k in range(3)]
    )
    np.testing.assert_allclose(dm.transform(new[:, None]), interpolated, atol=0.02)


def test_sparse_agrees_with_dense_on_dense_enough_graph():
    X = np.random.default_rng(4).normal(size=(300, 3))
    dense = DiffusionMap(n_components=3, epsilon=0.3).fit(X)
    complete = DiffusionMap(n_components=3, epsilon=0.3, n_neighbors=300).fit(X)
    np.testing.assert_allclose(complete.embedding_, dense.embedding_, atol=1e-10)
    knn = DiffusionMap(n_components=3, epsilon=0.3, n_neighbors=100).fit(X)
    np.testing.assert_allclose(knn.eigenvalues_, dense.eigenvalues_, rtol=1e-6)
    np.testing.assert_allclose(
        knn.embedding_, dense.embedding_, atol=1e-4 * np.abs(dense.embedding_).max()
    )


def test_all_points_as_landmarks_is_the_dense_map():
    X = np.random.default_rng(5).normal(size=(200, 3))
    dense = DiffusionMap(n_components=3, alpha=0.5, epsilon=2.0).fit(X)
    nystrom = DiffusionMap(n_components=3, alpha=0.5, epsilon=2.0, n_landmarks=200).fit(X)
    np.testing.assert_allclose(nystrom.eigenvalues_, dense.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(nystrom.embedding_, dense.embedding_, atol=1e-8)


def test_few_landmarks_approximate_a_smooth_kernel():
    x = interval_sample(1000, 3.0, seed=0)[:, None]
    dense = DiffusionMap(n_components=3, epsilon=0.05).fit(x)
    nystrom = DiffusionMap(n_components=3, epsilon=0.05, n_landmarks=100, random_state=0).fit(x)
    np.testing.assert_allclose(nystrom.eigenvalues_, dense.eigenvalues_, rtol=1e-5)
    np.testing.assert_allclose(nystrom.embedding_, dense.embedding_, atol=1e-3)
    new = np.linspace(0.0, 1.0, 20)[:, None]
    np.testing.assert_allclose(nystrom.transform(new), dense.transform(new), atol=1e-3)


def test_tanimoto_kernel_on_fingerprints():
    bits = (np.random.default_rng(6).random((300, 128)) < 0.15).astype(np.uint8)
    kernel = TanimotoKernel()
    dense = DiffusionMap(n_components=3, kernel=kernel).fit(bits)
    assert dense.epsilon_ is None
    expected, values, _ = reference_diffusion_map(kernel(bits), 1.0, 1, 3)
    np.testing.assert_allclose(aligned(dense.embedding_, expected), expected, atol=1e-8)
    nystrom = DiffusionMap(n_components=3, kernel=kernel, n_landmarks=300).fit(bits)
    np.testing.assert_allclose(nystrom.embedding_, dense.embedding_, atol=1e-8)
    complete = DiffusionMap(n_components=3, kernel=kernel, n_neighbors=300).fit(bits)
    np.testing.assert_allclose(complete.embedding_, dense.embedding_, atol=1e-10)
    sparse = DiffusionMap(n_components=3, kernel=kernel, n_neighbors=20).fit(bits)
    np.testing.assert_allclose(sparse.transform(bits[:50]), sparse.embedding_[:50], atol=1e-10)


@pytest.mark.parametrize("params", [{}, {"n_neighbors": 10}, {"n_landmarks": 40}])
def test_kernel_object_on_geometry_arrays(params):
    geometries = np.random.default_rng(7).normal(size=(80, 4, 3))  # (m, n_atoms, 3)
    kernel = CartesianKernel(gamma=0.1)  # exp(-0.05 |X - Z|^2), as epsilon = 20 below
    dm = DiffusionMap(n_components=2, kernel=kernel, random_state=0, **params).fit(geometries)
    flat = DiffusionMap(n_components=2, epsilon=20.0, random_state=0, **params).fit(
        geometries.reshape(80, -1)
    )
    np.testing.assert_allclose(dm.embedding_, flat.embedding_, atol=1e-10)
    np.testing.assert_allclose(dm.transform(geometries[:5]), dm.embedding_[:5], atol=1e-10)


@pytest.mark.parametrize("queries", [slice(None), slice(15, 30)], ids=["all", "a few"])
def test_knn_graph_of_an_asymmetric_kernel_gives_back_the_training_coordinates(queries):
    """The SVD kernel's Gram matrix is symmetric only to ~4e-15, and its entries change
    in the last bits with the block size: where a point is exactly the n-th neighbour of
    another, the join rule must still agree at fit and at transform."""
    geometries = np.random.default_rng(0).normal(size=(80, 5, 3))  # (m, n_atoms, 3)
    dm = DiffusionMap(n_components=2, kernel=SVDKernel(), n_neighbors=10).fit(geometries)
    np.testing.assert_allclose(
        dm.transform(geometries[queries]), dm.embedding_[queries], atol=1e-10
    )


def test_knn_graph_takes_a_plain_kernel_function():
    """A function kernel(X, Y) has no diag method: k(x, x) comes from its own blocks."""
    X = np.random.default_rng(3).normal(size=(100, 3))

    def gaussian(A, B):
        return np.exp(-np.square(A[:, None] - B[None]).sum(axis=2) / 2.0)

    dm = DiffusionMap(kernel=gaussian, n_neighbors=10).fit(X)
    reference = DiffusionMap(epsilon=2.0, n_neighbors=10).fit(X)
    np.testing.assert_allclose(dm.embedding_, reference.embedding_, atol=1e-10)
    np.testing.assert_allclose(dm.transform(X), dm.embedding_, atol=1e-10)


# signs and determinism


def knn_reference(X, epsilon, k, alpha, n_components):
    """Reference diffusion map of the symmetrised k-NN Gaussian graph (itself included)."""
    distances = kneighbors_graph(X, k - 1, mode="distance").toarray()  # itself excluded
    joined = (distances > 0) | (distances.T > 0) | np.eye(len(X), dtype=bool)
    A = np.where(joined, np.exp(-np.square(X[:, None] - X[None]).sum(-1) / epsilon), 0.0)
    return reference_diffusion_map(A, alpha, 1, n_components)


def test_large_sparse_graph_arpack_matches_reference_with_fixed_signs():
    """Above 2000 points a sparse graph goes to ARPACK (shift-invert, deflation by
    Rayleigh-Ritz): same result as LAPACK on the dense reference, and the same signs
    whatever the random start vector."""
    X = np.random.default_rng(8).random((2100, 2)) * [3.0, 1.0]
    first = DiffusionMap(n_components=3, n_neighbors=15, random_state=0).fit(X)
    second = DiffusionMap(n_components=3, n_neighbors=15, random_state=1).fit(X)
    np.testing.assert_allclose(second.embedding_, first.embedding_, atol=1e-8)
    expected, values, _ = knn_reference(X, first.epsilon_, 15, 1.0, 3)
    np.testing.assert_allclose(first.eigenvalues_, values, rtol=1e-10)
    np.testing.assert_allclose(aligned(first.embedding_, expected), expected, atol=1e-7)
    peak = np.abs(first.embedding_).argmax(axis=0)
    assert np.all(first.embedding_[peak, np.arange(3)] > 0)


def test_embedding_is_permutation_equivariant_signs_included():
    X = np.random.default_rng(9).normal(size=(200, 3))
    permutation = np.random.default_rng(10).permutation(200)
    dm = DiffusionMap(n_components=3, epsilon=1.0).fit(X)
    permuted = DiffusionMap(n_components=3, epsilon=1.0).fit(X[permutation])
    np.testing.assert_allclose(permuted.embedding_, dm.embedding_[permutation], atol=1e-10)


# kernel PCA on the same affinities


def test_kernel_pca_matches_scikit_learn_and_its_landmark_form():
    X = np.random.default_rng(11).normal(size=(200, 3))
    ours = KernelPCAEmbedding(n_components=3, epsilon=2.0).fit(X)
    reference = KernelPCA(n_components=3, kernel="rbf", gamma=0.5).fit(X)
    expected = reference.transform(X)
    np.testing.assert_allclose(ours.eigenvalues_, reference.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(aligned(ours.embedding_, expected), expected, atol=1e-8)
    nystrom = KernelPCAEmbedding(n_components=3, epsilon=2.0, n_landmarks=200).fit(X)
    np.testing.assert_allclose(nystrom.embedding_, ours.embedding_, atol=1e-8)
    new = X[:10] + 0.1
    np.testing.assert_allclose(nystrom.transform(new), ours.transform(new), atol=1e-8)
    np.testing.assert_allclose(ours.transform(X), ours.embedding_, atol=1e-10)


def test_diffusion_map_unrolls_what_kernel_pca_folds():
    """A strip rolled into a spiral: with the same Gaussian affinities, the first
    diffusion coordinate is monotone along the strip, kernel PCA's is not."""
    rng = np.random.default_rng(12)
    s = np.sort(rng.random(600) ** 2) * 3.0 * np.pi + np.pi  # denser near the centre
    X = np.column_stack([s * np.cos(s), s * np.sin(s)]) + 0.05 * rng.normal(size=(600, 2))
    dm = DiffusionMap(n_components=1, epsilon=1.0).fit(X)
    kpca = KernelPCAEmbedding(n_components=1, epsilon=1.0).fit(X)
    rank = np.argsort(np.argsort(s))

    def spearman(z):
        return abs(np.corrcoef(np.argsort(np.argsort(z)), rank)[0, 1])

    assert spearman(dm.embedding_[:, 0]) > 0.99
    assert spearman(kpca.embedding_[:, 0]) < 0.9


# bandwidth heuristic


@pytest.mark.parametrize("width", [3, 20])  # a tree search, and the brute force above 15
def test_median_knn_epsilon_does_not_depend_on_where_the_points_lie(width):
    X = np.random.default_rng(0).normal(size=(40, width))
    differences = X[:, None] - X[None]  # (n, n, d), no product of large numbers
    squared = np.sort((differences**2).sum(axis=2), axis=1)  # (n, n), 0 first
    expected = np.median(squared[:, min(EPSILON_NEIGHBORS, 39)])
    for offset in (0.0, 1e8, 1e9):
        assert median_knn_epsilon(X + offset) == pytest.approx(expected, rel=1e-6)


def test_median_knn_epsilon_on_a_regular_grid():
    X = np.arange(11.0)[:, None]  # spacing 1: the second neighbour is 1 away inside
    assert median_knn_epsilon(X, n_neighbors=2) == pytest.approx(1.0)
    assert median_knn_epsilon(X, n_neighbors=4) == pytest.approx(4.0)
    dm = DiffusionMap(n_components=2, n_neighbors=4).fit(X)
    assert dm.epsilon_ == pytest.approx(4.0)


# bad input


@pytest.mark.parametrize(
    "params, message",
    [
        ({"kernel": "laplacian"}, "kernel="),
        ({"kernel": 3}, "callable"),
        ({"kernel": TanimotoKernel(), "epsilon": 1.0}, "epsilon"),
        ({"alpha": 1.5}, "alpha"),
        ({"t": -1}, "t must"),
        ({"n_components": 0}, "n_components"),
        ({"n_components": 29}, "samples"),
        ({"n_neighbors": 1}, "n_neighbors"),
        ({"n_neighbors": 5, "n_landmarks": 10}, "alternatives"),
        ({"n_landmarks": 2}, "n_landmarks"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": np.inf}, "finite"),
    ],
)
def test_bad_parameters_raise_clear_errors(params, message):
    X = np.random.default_rng(13).normal(size=(30, 2))
    with pytest.raises(ValueError, match=message):
        DiffusionMap(**params).fit(X)


def test_bad_data_raise_clear_errors():
    X = np.random.default_rng(14).normal(size=(30, 2))
    with pytest.raises(ValueError, match="NaN"):
        DiffusionMap().fit(np.where(X > 2.0, np.nan, X))
    with pytest.raises(ValueError, match="dim"):
        DiffusionMap().fit(X[:, :, None])
    dm = DiffusionMap(epsilon=0.1).fit(X)
    with pytest.raises(ValueError, match="features"):
        dm.transform(X[:, :1])
    with pytest.raises(ValueError, match="reach"):
        dm.transform(np.array([[1e3, 1e3]]))


@parametrize_with_checks(
    [
        DiffusionMap(),
        DiffusionMap(n_neighbors=5),
        DiffusionMap(n_landmarks=10, random_state=0),
        KernelPCAEmbedding(),
        KernelPCAEmbedding(n_landmarks=10, random_state=0),
    ]
)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_landmark_pseudo_inverse_drops_duplicate_landmarks():
    """Duplicated points make the landmark Gram matrix singular; the pseudo-inverse
    keeps the Nyström kernel exact on the landmarks all the same."""
    X = np.random.default_rng(15).normal(size=(100, 2))
    doubled = np.vstack([X, X])
    dm = DiffusionMap(n_components=3, epsilon=2.0, n_landmarks=200).fit(doubled)
    single = DiffusionMap(n_components=3, epsilon=2.0).fit(X)
    np.testing.assert_allclose(dm.eigenvalues_, single.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(dm.embedding_[:100], single.embedding_, atol=1e-7)


@pytest.mark.parametrize("options", [{}, {"n_neighbors": 10}], ids=["dense", "knn graph"])
def test_a_narrow_kernel_keeps_every_component_asked_for(options):
    # the leading eigenvalues crowd at 1, where LAPACK's default driver may return none
    X = np.random.default_rng(0).normal(size=(40, 3))
    embedding = DiffusionMap(n_components=2, epsilon=0.01, random_state=0, **options)
    psi = embedding.fit_transform(X)
    assert psi.shape == (40, 2) and np.isfinite(psi).all()
    assert np.all(embedding.eigenvalues_ <= 1.0 + 1e-12)
    np.testing.assert_allclose(embedding.transform(X), psi, atol=1e-8)


def test_one_repeated_top_eigenvalue_still_gives_every_component():
    """With epsilon = 1e-3 no two of these points see each other (affinities below
    2e-17): the deflated Markov matrix has the eigenvalue 1 at its top, 49 times, where
    LAPACK's subset drivers return no eigenpair at all."""
    X = np.random.default_rng(0).normal(size=(50, 3))
    dm = DiffusionMap(epsilon=1e-3).fit(X)
    assert dm.embedding_.shape == (50, 2)
    np.testing.assert_allclose(dm.eigenvalues_, 1.0, atol=1e-12)
    np.testing.assert_allclose(dm.transform(X), dm.embedding_, atol=1e-10)


@pytest.mark.parametrize(
    "X, params",
    [
        (np.ones((50, 3)), {"epsilon": 1.0}),
        (np.ones((50, 3)), {"epsilon": 1.0, "n_neighbors": 5}),
        (np.random.default_rng(0).normal(size=(50, 3)), {"epsilon": 1e300}),
        (np.random.default_rng(0).normal(size=(60, 3)), {"epsilon": 1e3, "n_components": 20}),
    ],
    ids=["identical points", "identical points, knn", "epsilon 1e300", "too many components"],
)
def test_round_off_eigenvalues_are_refused(X, params):
    """Transform divides by the eigenvalues: those below 1e-10 (of the leading 1) are
    refused at fit, rather than giving NaN or noise."""
    with pytest.raises(ValueError, match=r"below 1e-10 .* narrower kernel"):
        DiffusionMap(**params).fit(X)


def test_small_eigenvalues_keep_transform_exact_to_round_off_over_eigenvalue():
    """A wide kernel: the 10th eigenvalue is 6e-9. The trivial eigenvector is deflated to
    -1, away from these, so transform of a training point is off by ~1e-16 / lambda."""
    X = np.random.default_rng(0).normal(size=(60, 3))
    dm = DiffusionMap(n_components=10, epsilon=1e3, t=0).fit(X)
    assert dm.eigenvalues_[-1] < 1e-8
    error = np.abs(dm.transform(X) - dm.embedding_).max(axis=0)  # (10,)
    assert np.all(error * dm.eigenvalues_ < 1e-14)


@pytest.mark.parametrize(
    "kernel", [TanimotoKernel(), LinearKernel(offset=10.0)], ids=["tanimoto", "linear"]
)
@pytest.mark.parametrize("params", [{}, {"n_landmarks": 100}], ids=["dense", "landmarks"])
def test_negative_affinities_are_refused(kernel, params):
    X = np.random.default_rng(0).normal(size=(100, 5))  # real-valued: negative affinities
    with pytest.raises(ValueError, match="non-negative affinities"):
        DiffusionMap(kernel=kernel, **params).fit(X)


def test_negative_affinities_of_new_points_are_refused():
    rng = np.random.default_rng(1)
    counts = rng.poisson(1.0, size=(50, 6)).astype(float)
    dm = DiffusionMap(kernel=TanimotoKernel()).fit(counts)
    with pytest.raises(ValueError, match="non-negative affinities"):
        dm.transform(rng.normal(size=(3, 6)))


def test_landmark_row_sum_error_names_the_outlying_points():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(300, 2)), [[100.0, 0.0]]])
    with pytest.raises(ValueError, match=r"points \[300\] \(1 in all\)"):
        DiffusionMap(n_landmarks=50, epsilon=1.0, random_state=0).fit(X)


@pytest.mark.parametrize("estimator", [DiffusionMap, KernelPCAEmbedding])
def test_identical_landmarks_are_named_as_such(estimator):
    with pytest.raises(ValueError, match="identical"):
        estimator(epsilon=1.0, n_landmarks=10, random_state=0).fit(np.ones((30, 2)))


@pytest.mark.parametrize("n_neighbors", [0, -1, 2.7])
def test_median_knn_epsilon_refuses_a_bad_neighbour_rank(n_neighbors):
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="an integer >= 1"):
        median_knn_epsilon(X, n_neighbors)


def test_a_graph_that_falls_apart_goes_to_lapack_or_is_refused_naming_the_points_cut_off():
    """A narrow kernel (a tenth of the default width) on the 5-NN graph of Gaussian points
    in 3-D: with the weights below 1e-10 dropped the graph falls into many pieces, so many
    eigenvalues lie within about 1e-10 of 1, far more than the 2 eigenvectors asked for,
    and ARPACK does not converge (it gave up after 25 000 restarts, 4 minutes, at 2500
    points). At 2500 points the fit goes to LAPACK after 50 restarts; above 5000 it stops
    there and names the points cut off."""
    X = np.random.default_rng(0).normal(size=(2500, 3))
    fitted = DiffusionMap(n_neighbors=5, epsilon=0.008, random_state=0).fit(X)
    assert fitted.eigenvalues_ == pytest.approx(np.ones(2), abs=1e-9)
    np.testing.assert_allclose(fitted.transform(X[:40]), fitted.embedding_[:40], atol=1e-8)
    X = np.random.default_rng(0).normal(size=(5200, 3))
    with pytest.raises(ValueError, match=r"ARPACK did not converge .* groups .*points \["):
        DiffusionMap(n_neighbors=5, epsilon=0.008, random_state=0).fit(X)
