"""Diffusion maps: a renormalised kernel PCA, with the landmark (Nyström) approximation.

The blog post "Scaling Kernel Embeddings, Pt. 1" (2025) presents diffusion maps as kernel PCA on
a renormalised affinity matrix. With affinities ``A`` (a Gaussian kernel, any kernel of
:mod:`asebo.kernels`, or a symmetrised k-nearest-neighbour graph), the algorithm of
the blog post is

1. ``q_i = sum_j A_ij``,
2. ``A_ij <- A_ij / (q_i^alpha q_j^alpha)`` (the density correction),
3. ``d_i = sum_j A_ij``, ``D = diag(d)``,
4. ``P = D^{-1/2} A D^{-1/2}``,
5. the leading eigenvectors of ``P``, the trivial one dropped, scaled by
   ``eigenvalue^t``.

Two corrections to the code printed in the blog post are made here, and tested:

* the coordinates are the right eigenvectors of the Markov matrix ``D^{-1} A``,
  ``psi = D^{-1/2} u`` for an eigenvector ``u`` of ``P`` (Coifman & Lafon 2006,
  sec. 2.1). The blog post returns ``u`` itself, which carries a factor ``sqrt(d)``, a
  function of the sampling density that ``alpha = 1`` was meant to remove;
* the Nyström embedding of the blog post (``dm_nystrom_embed``) applies neither the
  ``alpha`` correction nor drops the trivial eigenvector, and projects on the
  eigenvectors without the ``1 / sqrt(eigenvalue)`` that makes them unit vectors.

``psi`` is normalised so that ``psi_0 = 1`` and
``sum_i pi_i psi_k(x_i)^2 = 1`` with the stationary distribution ``pi = d / sum(d)``:
the coordinates then do not scale with the number of samples.

New points are placed by the Nyström extension
``psi_k(x) = (1 / lambda_k) sum_j p(x, x_j) psi_k(x_j)``, where ``p(x, .)`` is the
transition probability from ``x`` built with the same ``alpha`` normalisation; on the
training points it returns the fitted coordinates, up to a round-off of about
``1e-16 / lambda_k`` in ``psi_k``.

References
----------
.. [1] "Scaling Kernel Embeddings, Pt. 1" (2025): the diffusion-map algorithm
   (steps 1-6 of its "final algorithm"), the biased swiss roll, and the
   Nyström-approximated Tanimoto embeddings of molecules (``nystrom``,
   ``dm_nystrom_embed``).
.. [2] R. R. Coifman, S. Lafon, "Diffusion maps", Appl. Comput. Harmon. Anal. 21,
   5-30 (2006): the alpha family of normalisations, eqs. (2)-(4) of sec. 2.1.
.. [3] C. K. I. Williams, M. Seeger, "Using the Nyström method to speed up kernel
   machines", NIPS 13 (2001).
.. [4] Y. Bengio et al., "Out-of-sample extensions for LLE, Isomap, MDS, Eigenmaps,
   and spectral clustering", NIPS 16 (2004).
"""

import numbers

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from scipy.spatial.distance import cdist

from asebo.extras import missing_extra
from asebo.kernels import GaussianKernel

try:
    from sklearn.base import (
        BaseEstimator,
        ClassNamePrefixFeaturesOutMixin,
        TransformerMixin,
    )
    from sklearn.decomposition import KernelPCA
    from sklearn.neighbors import NearestNeighbors
    from sklearn.utils import check_random_state
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as error:
    raise missing_extra(error, "learn", "asebo.learn.diffusion") from error

__all__ = ["DiffusionMap", "KernelPCAEmbedding", "median_knn_epsilon"]

EPSILON_NEIGHBORS = 10
"""The neighbour rank k of the default bandwidth, :func:`median_knn_epsilon`."""

_CHUNK_ELEMENTS = 2**22
"""Kernel blocks are evaluated a few rows at a time, about this many entries a block."""

_DENSE_EIGEN_MAX = 2000
"""Sparse graphs up to this size are diagonalised densely (LAPACK), larger ones by ARPACK
in shift-invert mode; dense matrices always by LAPACK, which does not slow down when the
leading eigenvalues crowd near 1 (a narrow kernel), as ARPACK in its plain mode does."""

_SHIFT = 1.0 + 1e-6
"""Shift of ARPACK's shift-invert mode for a Markov matrix, whose eigenvalues are <= 1."""

_DENSE_FALLBACK_MAX = 5000
"""Sparse graphs up to this size whose leading eigenvalues ARPACK does not resolve in
``_ARPACK_MAXITER`` restarts are diagonalised densely instead (LAPACK, about 15 s and
0.2 GB at 5000 points); larger ones are refused, naming the points that cut the graph."""

_ARPACK_MAXITER = 50
"""Restarts allowed to ARPACK. Connected graphs of 2100 to 20 000 points converge in 5.
A graph that falls apart into more pieces than the eigenvectors asked for repeats the
eigenvalue 1 to round-off, which shift-invert resolves slowly or not at all: no
convergence in 25 000 restarts (4 minutes) for the 5-NN graph of 2500 Gaussian points in
3-D at a tenth of the default width, nor in 1000 (5 minutes) for the 15-NN graph of
20 000 in 2-D at the default width."""

_EIGEN_RTOL = 1e-10
"""Eigenvalues below this fraction of the largest are round-off. Those of the landmark
Gram matrix are dropped from its pseudo-inverse; among the nontrivial eigenvalues of the
Markov matrix (largest 1) they are refused, as ``transform`` divides by them."""

_JOIN_RTOL = 1e-9
"""Relative slack of the k-nearest-neighbour join rule, above the round-off of the
distances: a kernel-induced distance ``k(x, x) + k(y, y) - 2 k(x, y)`` is off by a few
ulps of ``|k(x, x)| + |k(y, y)|``, and ``d(x, y)`` may differ from ``d(y, x)``."""

_DIAGONAL_ROWS = 64
"""Rows of the diagonal blocks ``kernel(X[rows], X[rows])`` that give ``k(x, x)`` for a
kernel without a ``diag`` method."""


def median_knn_epsilon(X, n_neighbors=EPSILON_NEIGHBORS):
    """Default Gaussian bandwidth: the median squared distance to the k-th neighbour.

    ``epsilon = median_i |x_i - x_i^(k)|^2``, where ``x_i^(k)`` is the k-th nearest
    other point. At that distance the kernel ``exp(-|x - y|^2 / epsilon)`` is
    ``1/e``, so a typical point is well connected to about k neighbours: local enough
    to follow a curved manifold, wide enough to keep the graph connected.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    n_neighbors : int >= 1
        The neighbour rank k; clipped to ``n_samples - 1``.

    Returns
    -------
    float
    """
    if not (isinstance(n_neighbors, numbers.Integral) and n_neighbors >= 1):
        raise ValueError(
            f"n_neighbors is the rank of the neighbour whose distance sets epsilon, "
            f"an integer >= 1; got {n_neighbors!r}"
        )
    X = np.asarray(X, dtype=np.float64)  # (n, d)
    if X.ndim != 2 or len(X) < 2:
        raise ValueError(f"need a 2-D array of at least 2 samples, got shape {X.shape}")
    k = min(int(n_neighbors), len(X) - 1)
    X = X - X.mean(axis=0)  # distances by |x|^2 + |y|^2 - 2 x.y keep their digits near 0
    distances, _ = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)  # (n, k+1)
    epsilon = float(np.median(distances[:, k] ** 2))
    if not epsilon > 0:
        raise ValueError(
            "more than half of the points have k identical copies, so the "
            "median neighbour distance is 0: pass epsilon explicitly"
        )
    return epsilon


def _chunk_rows(n_columns, row_size=1):
    """Rows of a block with ``n_columns`` columns that keeps it near ``_CHUNK_ELEMENTS``."""
    return max(1, _CHUNK_ELEMENTS // max(n_columns, row_size, 1))


def _row_slices(n_rows, size):
    """Consecutive slices of at most ``size`` rows covering ``range(n_rows)``."""
    return (slice(start, min(start + size, n_rows)) for start in range(0, n_rows, size))


def _kernel_blocks(kernel, X, Y):
    """Yield ``(rows, kernel(X[rows], Y))`` a few rows at a time, so memory stays bounded.

    The kernel converts its arguments to float64 one block at a time, so fingerprints
    may stay in a compact dtype (bool, uint8) until then.
    """
    for rows in _row_slices(len(X), _chunk_rows(len(Y), int(np.prod(X.shape[1:])))):
        yield rows, np.asarray(kernel(X[rows], Y), dtype=np.float64)  # (b, len(Y))


def _kernel_matrix(kernel, X, Y):
    """The full ``(len(X), len(Y))`` Gram matrix, evaluated block by block."""
    K = np.empty((len(X), len(Y)))
    for rows, block in _kernel_blocks(kernel, X, Y):
        K[rows] = block
    return K


def _scale_symmetric(A, s):
    """``diag(s) A diag(s)``; a dense A is scaled in place."""
    if scipy.sparse.issparse(A):
        return scipy.sparse.diags(s) @ A @ scipy.sparse.diags(s)
    A *= s[:, None]
    A *= s[None, :]
    return A


def _sign_flips(Z):
    """Signs that make the entry of largest magnitude of every column positive."""
    peak = Z[np.argmax(np.abs(Z), axis=0), np.arange(Z.shape[1])]
    return np.where(peak < 0, -1.0, 1.0)


def _top_eigenpairs(matrix, k, random_state, deflate=None):
    """The k largest eigenpairs of a symmetric matrix, in decreasing order.

    Dense matrices and small sparse ones go to LAPACK: its subset driver, and the full
    divide-and-conquer decomposition where that returns fewer than k pairs (it can return
    none when the top of the spectrum is one repeated value). A large sparse matrix must be a
    normalised Markov matrix ``P`` (spectrum in [-1, 1]); where ARPACK does not converge
    in ``_ARPACK_MAXITER`` restarts, it goes to LAPACK up to ``_DENSE_FALLBACK_MAX`` rows
    and is refused above. ARPACK works in
    shift-invert mode about ``_SHIFT``, just above the spectrum, where the leading
    eigenvalues, crowded near 1 for a narrow kernel, are well separated; ``deflate``
    is projected out of the ``k + 1`` leading eigenvectors, and the rest
    re-diagonalised on the subspace left (Rayleigh-Ritz).

    Parameters
    ----------
    matrix : array or sparse matrix of shape (n, n)
    k : int
    random_state : numpy.random.RandomState
        Start vector of ARPACK, for reproducibility.
    deflate : array of shape (n,), optional
        A unit eigenvector of eigenvalue 1 to remove first. LAPACK gets
        ``matrix - 2 deflate deflate^T``, where its eigenvalue is -1, the bottom of a
        Markov spectrum: moved to 0 instead, it would mix with the eigenvectors of
        eigenvalues near 0 by round-off, which the Nyström extension divides by those
        eigenvalues.
    """
    n = matrix.shape[0]
    if scipy.sparse.issparse(matrix) and n > _DENSE_EIGEN_MAX:
        try:
            values, vectors = _arpack_top_eigenpairs(matrix, k, random_state, deflate)
        except scipy.sparse.linalg.ArpackNoConvergence as error:
            if n > _DENSE_FALLBACK_MAX:
                raise _crowded_top_error(matrix) from error
            values, vectors = _dense_top_eigenpairs(matrix, k, deflate)
    else:
        values, vectors = _dense_top_eigenpairs(matrix, k, deflate)
    order = np.argsort(values)[::-1]
    return values[order], vectors[:, order]


def _arpack_top_eigenpairs(matrix, k, random_state, deflate):
    """The k largest eigenpairs of a sparse Markov matrix by ARPACK in shift-invert mode
    (see :func:`_top_eigenpairs`), in any order; raises ``ArpackNoConvergence`` after
    ``_ARPACK_MAXITER`` restarts."""
    n = matrix.shape[0]
    extra = 0 if deflate is None else 1
    values, vectors = scipy.sparse.linalg.eigsh(
        matrix.tocsc(),
        k=k + extra,
        sigma=_SHIFT,
        which="LM",
        v0=random_state.uniform(-1.0, 1.0, n),
        maxiter=_ARPACK_MAXITER,
    )
    if deflate is not None:
        vectors -= np.outer(deflate, deflate @ vectors)  # (n, k+1), rank k
        basis = np.linalg.svd(vectors, full_matrices=False)[0][:, :k]  # (n, k)
        values, rotation = scipy.linalg.eigh(basis.T @ (matrix @ basis))
        vectors = basis @ rotation
    return values, vectors


def _dense_top_eigenpairs(matrix, k, deflate):
    """The k largest eigenpairs of a symmetric (n, n) matrix by LAPACK (see
    :func:`_top_eigenpairs`), ascending."""
    n = matrix.shape[0]
    dense = matrix.toarray() if scipy.sparse.issparse(matrix) else np.array(matrix)
    if deflate is not None:
        dense -= 2.0 * np.outer(deflate, deflate)  # its eigenvalue 1 -> -1
    values, vectors = scipy.linalg.eigh(dense, subset_by_index=[n - k, n - 1])
    if len(values) < k:  # evr (and evx) can return none for a cluster of equal top values
        values, vectors = scipy.linalg.eigh(dense, driver="evd")  # all n, divide and conquer
        values, vectors = values[n - k :], vectors[:, n - k :]
    return values, vectors


def _diagonal(kernel, X):
    """``k(x_i, x_i)`` for every row of X, shape (n,).

    From ``kernel.diag`` where the kernel has one (the kernels of :mod:`asebo.kernels`),
    else from the diagonals of small blocks ``kernel(X[rows], X[rows])``, so that a plain
    function ``kernel(X, Y)`` serves as well.
    """
    if hasattr(kernel, "diag"):
        return np.asarray(kernel.diag(X), dtype=np.float64)
    diagonal = np.empty(len(X))
    for rows in _row_slices(len(X), _DIAGONAL_ROWS):
        diagonal[rows] = np.diagonal(np.asarray(kernel(X[rows], X[rows]), dtype=np.float64))
    return diagonal


def _crowded_top_error(P):
    """The ValueError for a Markov matrix P whose leading eigenvalues ARPACK cannot resolve.

    Names the points cut off from the largest group of the graph of P once its entries
    below ``_EIGEN_RTOL`` are dropped: each such group adds an eigenvalue within about
    that much of 1.
    """
    count, labels = scipy.sparse.csgraph.connected_components(P > _EIGEN_RTOL, directed=False)
    cut_off = np.flatnonzero(labels != np.argmax(np.bincount(labels)))  # (n - size of largest,)
    return ValueError(
        f"ARPACK did not converge in {_ARPACK_MAXITER} restarts: the leading eigenvalues of "
        f"the Markov matrix crowd within round-off of 1, its graph falling into {count} "
        f"groups once the transition probabilities below {_EIGEN_RTOL:g} are dropped "
        f"(points {cut_off[:5].tolist()}, {cut_off.size} in all, are cut off from the "
        "largest). Widen the kernel (larger epsilon) or join more neighbours, so that no "
        "point is left out of reach, or leave these outlying points out of the fit"
    )


class _NeighborGraph:
    """The symmetrised k-nearest-neighbour graph and its extension to new points.

    Two points are joined, with their kernel value as weight, when either is among the
    ``n_neighbors`` nearest of the other (itself included): ``A = max(W, W^T)`` for
    the directed k-NN affinities ``W``. A new point x is joined to its own nearest
    fitted points and to every fitted point ``x_j`` it would have been a nearest
    neighbour of (closer than the ``n_neighbors``-th neighbour of ``x_j``), so that on
    a fitted point the row is that point's row of ``A``. Nearness is the Euclidean
    distance for ``kernel='gaussian'`` (``euclidean=True``; kernel values underflow
    far away, distances do not) and the kernel-induced distance
    ``k(x, x) + k(y, y) - 2 k(x, y)`` for a kernel object, found block by block.

    Both comparisons allow a slack of ``_JOIN_RTOL`` times the size of the terms of the
    distance (the distance itself, or ``|k(x, x)| + |k(y, y)|``), the same at fit and
    at transform: a kernel need not give ``k(x, y)`` and ``k(y, x)``, or the same entry
    in blocks of other sizes, to the last bit, and without the slack a point that is
    exactly the n-th neighbour of another could be joined in one direction only.
    """

    def __init__(self, kernel, X, n_neighbors, euclidean):
        self.kernel = kernel
        self.X = X  # (n, ...)
        self.n_neighbors = n_neighbors
        self.euclidean = euclidean
        self.self_similarity = None if euclidean else _diagonal(kernel, X)  # (n,)
        self.radius = np.empty(len(X))  # (n,) distance to the n_neighbors-th neighbour
        for rows, distance, _, _ in self._blocks(X):
            self.radius[rows] = self._kth(distance)[:, 0]

    def _kth(self, distance):
        return np.partition(distance, self.n_neighbors - 1, axis=1)[
            :, self.n_neighbors - 1 : self.n_neighbors
        ]

    def _blocks(self, Xq):
        """Yield ``(rows, distance, slack, affinity)`` blocks of shape (b, n)."""
        if self.euclidean:
            for rows in _row_slices(len(Xq), _chunk_rows(len(self.X))):
                distance = cdist(Xq[rows], self.X, "sqeuclidean")  # (b, n)
                yield rows, distance, _JOIN_RTOL * distance, np.exp(-self.kernel.gamma * distance)
        else:
            for rows, K in _kernel_blocks(self.kernel, Xq, self.X):
                diagonal = _diagonal(self.kernel, Xq[rows])  # (b,)
                distance = diagonal[:, None] + self.self_similarity[None, :] - 2.0 * K
                size = np.abs(diagonal)[:, None] + np.abs(self.self_similarity)[None, :]
                yield rows, distance, _JOIN_RTOL * size, K

    def rows(self, Xq):
        """Sparse ``(len(Xq), n)`` matrix of the affinities of Xq to the fitted points."""
        row_index, column_index, values = [], [], []
        for rows, distance, slack, K in self._blocks(Xq):
            joined = distance - slack <= np.maximum(self._kth(distance), self.radius[None, :])
            r, c = np.nonzero(joined)
            row_index.append(r + rows.start)
            column_index.append(c)
            values.append(K[r, c])
        return scipy.sparse.csr_matrix(
            (np.concatenate(values), (np.concatenate(row_index), np.concatenate(column_index))),
            shape=(len(Xq), len(self.X)),
        )


class _KernelEmbedding(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Input checks, kernel resolution and landmark basis shared by the two embeddings."""

    def _validate_input(self, X, reset):
        gaussian = isinstance(self.kernel, str)
        return validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float64 if gaussian else None,
            allow_nd=not gaussian,
            ensure_min_samples=2 if reset else 1,
        )

    def _check_common_params(self, n_samples):
        if isinstance(self.kernel, str):
            if self.kernel != "gaussian":
                raise ValueError(
                    f"kernel={self.kernel!r}: use 'gaussian' or a kernel "
                    "object of asebo.kernels (callable kernel(X, Y))"
                )
        elif not callable(self.kernel):
            raise ValueError(
                "kernel must be 'gaussian' or a callable kernel(X, Y) that "
                "returns the Gram matrix, such as asebo.kernels.TanimotoKernel()"
            )
        elif self.epsilon is not None:
            raise ValueError(
                "epsilon is the width of kernel='gaussian'; set the width of "
                "a kernel object on the object itself"
            )
        if self.epsilon is not None and not (
            isinstance(self.epsilon, numbers.Real) and 0 < self.epsilon < np.inf
        ):
            raise ValueError(
                f"epsilon must be a positive finite number or None, got {self.epsilon!r}"
            )
        if not (isinstance(self.n_components, numbers.Integral) and self.n_components >= 1):
            raise ValueError(f"n_components must be a positive integer, got {self.n_components!r}")
        if self.n_components > n_samples - 2:
            raise ValueError(
                f"n_components={self.n_components} needs at least "
                f"{self.n_components + 2} samples, got n_samples={n_samples}"
            )
        if self.n_landmarks is not None and not (
            isinstance(self.n_landmarks, numbers.Integral)
            and self.n_landmarks >= self.n_components + 2
        ):
            raise ValueError(
                f"n_landmarks must be None or an integer of at least "
                f"n_components + 2 = {self.n_components + 2}, got "
                f"{self.n_landmarks!r}"
            )

    def _resolve_kernel(self, X, n_neighbors):
        """The kernel object and the Gaussian width (None for kernel objects)."""
        if not isinstance(self.kernel, str):
            return self.kernel, None
        epsilon = (
            median_knn_epsilon(X, n_neighbors) if self.epsilon is None else float(self.epsilon)
        )
        return GaussianKernel(gamma=1.0 / epsilon), epsilon

    def _landmark_basis(self, X, random_state):
        """Pick landmarks uniformly at random and the map ``R`` of ``phi(x) = k(x, L) R``.

        ``R = U mu^{-1/2}`` over the retained eigenpairs ``(mu, U)`` of the landmark
        Gram matrix ``W``, so that ``phi(x) . phi(y) = k(x, L) W^+ k(L, y)``, the
        Nyström approximation of ``k(x, y)`` (ref. [3], the blog post's ``nystrom``).
        Returns ``R`` of shape (m, r), r <= m.
        """
        m = min(self.n_landmarks, len(X))
        self.landmark_indices_ = np.sort(random_state.choice(len(X), m, replace=False))
        self.landmarks_ = X[self.landmark_indices_]
        self.kernel_, self.epsilon_ = self._resolve_kernel(self.landmarks_, EPSILON_NEIGHBORS)
        W = _kernel_matrix(self.kernel_, self.landmarks_, self.landmarks_)  # (m, m)
        mu, U = scipy.linalg.eigh(0.5 * (W + W.T))
        keep = mu > _EIGEN_RTOL * mu[-1]
        if keep.sum() < self.n_components + 1:
            raise ValueError(
                f"the landmark Gram matrix has rank {keep.sum()} (eigenvalues above "
                f"{_EIGEN_RTOL:g} of the largest), too low for n_components="
                f"{self.n_components}: the kernel tells fewer than n_components + 1 of the "
                "landmarks apart, they are (nearly) identical at its width. Use a narrower "
                "kernel (smaller epsilon), or more landmarks if the data have more distinct points"
            )
        return U[:, keep] / np.sqrt(mu[keep])  # (m, r)


class DiffusionMap(_KernelEmbedding):
    """Diffusion-map embedding, a scikit-learn transformer.

    Parameters
    ----------
    n_components : int
        Number of diffusion coordinates (the trivial constant one excluded).
    alpha : float in [0, 1]
        Density correction: 0 is the normalised graph Laplacian, whose eigenvectors
        follow the sampling density; 1 approximates the Laplace-Beltrami operator of
        the manifold, whatever the density (ref. [2]); 0.5 the Fokker-Planck operator.
    t : float >= 0
        Diffusion time: coordinate k is scaled by ``eigenvalue_k ** t``.
    kernel : 'gaussian' or callable
        ``'gaussian'``: ``k(x, y) = exp(-|x - y|^2 / epsilon)`` on 2-D float arrays.
        Otherwise a kernel object such as those of :mod:`asebo.kernels`
        (``kernel(X, Y)`` returns the Gram matrix; ``kernel.diag(X)`` its diagonal,
        used by the k-nearest-neighbour graph, which a plain function without it
        replaces by small blocks): Tanimoto on fingerprints, the SVD kernel on
        geometries of shape (n, n_atoms, 3). Its values must not be negative, as the
        affinities are the weights of a random walk.
    epsilon : float, optional
        Width of the Gaussian kernel, positive and finite. By default
        :func:`median_knn_epsilon` with k = ``n_neighbors`` (k = ``EPSILON_NEIGHBORS``
        without a graph), computed among the landmarks in landmark mode so that the
        kernel is wide enough for them.
    n_neighbors : int, optional
        Keep only the affinities to the ``n_neighbors`` nearest points (itself
        included) and symmetrise, ``A = max(W, W^T)``: a sparse graph. A new point is
        joined to its own nearest training points and to those it would be a nearest
        neighbour of, so ``transform`` of a training point gives back its coordinates.
        Dense when None.
    n_landmarks : int, optional
        Landmark (Nyström) approximation with this many landmarks drawn uniformly:
        memory and time linear in ``n_samples`` (ref. [1], ``nystrom``).
    random_state : int, RandomState or None
        Draws the landmarks and the ARPACK start vector. The start vector matters only
        within a repeated eigenvalue (see ``embedding_``).

    Attributes
    ----------
    eigenvalues_ : array of shape (n_components,)
        Leading nontrivial eigenvalues of the Markov matrix, decreasing; none below
        ``1e-10`` in magnitude (the fit refuses such round-off).
    embedding_ : array of shape (n_samples, n_components)
        Diffusion coordinates ``eigenvalues_**t * psi`` of the training points. The
        entry of largest magnitude of each column is positive. For a simple eigenvalue
        whose eigenvector has a unique entry of largest magnitude, the column is then
        determined: permuting the samples permutes it. Where two entries of opposite
        signs tie to round-off (data with a symmetry), the sign may follow the sample
        order; for a repeated eigenvalue only the subspace of its columns is
        determined, their basis depends on the sample order and the start vector.
    kernel_ : kernel object
        The kernel used (a :class:`asebo.kernels.GaussianKernel` for ``'gaussian'``).
    epsilon_ : float or None
        The Gaussian width used; None for a kernel object.
    landmarks_, landmark_indices_ : arrays
        The landmarks and their rows in the training data (landmark mode only).

    References
    ----------
    "Scaling Kernel Embeddings, Pt. 1" (final algorithm, steps 1-6; ``nystrom``) and
    refs. [1]-[4] of :mod:`asebo.learn.diffusion`.
    """

    def __init__(
        self,
        n_components=2,
        alpha=1.0,
        t=1,
        kernel="gaussian",
        epsilon=None,
        n_neighbors=None,
        n_landmarks=None,
        random_state=None,
    ):
        self.n_components = n_components
        self.alpha = alpha
        self.t = t
        self.kernel = kernel
        self.epsilon = epsilon
        self.n_neighbors = n_neighbors
        self.n_landmarks = n_landmarks
        self.random_state = random_state

    def _check_params(self, n_samples):
        self._check_common_params(n_samples)
        if not (isinstance(self.alpha, numbers.Real) and 0.0 <= self.alpha <= 1.0):
            raise ValueError(f"alpha must be a number in [0, 1], got {self.alpha!r}")
        if not (isinstance(self.t, numbers.Real) and self.t >= 0):
            raise ValueError(f"t must be a non-negative number, got {self.t!r}")
        if self.n_neighbors is not None:
            if not (isinstance(self.n_neighbors, numbers.Integral) and self.n_neighbors >= 2):
                raise ValueError(
                    f"n_neighbors must be None or an integer >= 2, got {self.n_neighbors!r}"
                )
            if self.n_landmarks is not None:
                raise ValueError(
                    "n_neighbors (sparse graph) and n_landmarks (Nyström) "
                    "are two alternatives: set one of them"
                )

    def fit(self, X, y=None):
        """Compute the diffusion coordinates of X.

        Parameters
        ----------
        X : array of shape (n_samples, ...)
            2-D float array for ``kernel='gaussian'``, any array the kernel object takes
            otherwise.
        y : ignored

        Returns
        -------
        self
        """
        X = self._validate_input(X, reset=True)
        self._check_params(len(X))
        random_state = check_random_state(self.random_state)
        if self.n_landmarks is None:
            psi = self._fit_graph(X, random_state)
        else:
            psi = self._fit_landmarks(X, random_state)
        self.embedding_ = psi * self._scales()  # (n, k)
        self._n_features_out = self.n_components
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the diffusion coordinates of the training points."""
        return self.fit(X).embedding_

    def transform(self, X):
        """Nyström extension of the diffusion coordinates to new points.

        ``psi_k(x) = (1 / lambda_k) sum_j p(x, x_j) psi_k(x_j)`` with the transition
        probabilities ``p(x, x_j)`` of x under the fitted ``alpha`` normalisation
        (ref. [4]); exact on the training points. In landmark mode ``p`` is that of the
        Nyström-approximated kernel, through the landmarks only. With a sparse graph
        the new point is joined as a training point would be (see ``n_neighbors``).

        Parameters
        ----------
        X : array of shape (n_queries, ...)

        Returns
        -------
        array of shape (n_queries, n_components)
        """
        check_is_fitted(self, "embedding_")
        X = self._validate_input(X, reset=False)
        Z = np.empty((len(X), self.n_components))
        if self.n_landmarks is None:
            self._extend_graph(X, Z)
        else:
            self._extend_landmarks(X, Z)
        return Z * self._scales()

    def _scales(self):
        return self.eigenvalues_**self.t  # (k,)

    def _affinity(self, X):
        if self.n_neighbors is None:
            return _kernel_matrix(self.kernel_, X, X)  # (n, n)
        self._graph = _NeighborGraph(
            self.kernel_, X, min(self.n_neighbors, len(X)), euclidean=isinstance(self.kernel, str)
        )
        A = self._graph.rows(X)  # (n, n) sparse, symmetric up to round-off and ties
        return A.maximum(A.T).tocsr()

    def _fit_graph(self, X, random_state):
        """Steps 1-6 of the blog post on the dense or sparse affinity matrix; returns psi."""
        self.kernel_, self.epsilon_ = self._resolve_kernel(
            X, EPSILON_NEIGHBORS if self.n_neighbors is None else self.n_neighbors
        )
        A = self._affinity(X)  # (n, n)
        _check_nonnegative(A)
        q = np.asarray(A.sum(axis=1)).ravel()  # (n,) step 1
        if not np.all(q > 0):
            raise ValueError("some points have no affinity to any point: widen the kernel")
        weights = q**-self.alpha  # (n,)
        A = _scale_symmetric(A, weights)  # step 2: Q^-alpha A Q^-alpha
        d = np.asarray(A.sum(axis=1)).ravel()  # (n,) step 3
        root_d = np.sqrt(d)
        P = _scale_symmetric(A, 1.0 / root_d)  # step 4: D^-1/2 A D^-1/2
        total = d.sum()
        trivial = root_d / np.sqrt(total)  # (n,) eigenvector of P, eigenvalue 1
        values, u = _top_eigenpairs(P, self.n_components, random_state, deflate=trivial)
        self._check_eigenvalues(values)
        self.eigenvalues_ = values
        psi = np.sqrt(total) * u / root_d[:, None]  # (n, k)
        psi *= _sign_flips(psi)
        self.X_fit_ = X
        self._weights = weights
        self._psi = psi
        return psi

    def _fit_landmarks(self, X, random_state):
        """Diffusion map of the Nyström-approximated kernel ``Phi Phi^T``; returns psi.

        With ``phi_i = C_i R`` (``C = k(X, L)``, see ``_landmark_basis``) every sum over
        the n points is done through r-vectors and the r x r matrix
        ``M = sum_i phi_i^T phi_i w_i^2 / d_i``, whose eigenpairs are those of
        ``P = D^{-1/2} Q^{-alpha} Phi Phi^T Q^{-alpha} D^{-1/2}``: O(n m) memory.
        """
        R = self._landmark_basis(X, random_state)  # (m, r)
        C = _kernel_matrix(self.kernel_, X, self.landmarks_)  # (n, m)
        _check_nonnegative(C)
        q = C @ (R @ (R.T @ C.sum(axis=0)))  # (n,) approximate row sums of the kernel
        _check_nystrom_positive(q, "row sums", C)
        weights = q**-self.alpha  # (n,)
        g = R.T @ (C.T @ weights)  # (r,) = Phi_alpha^T 1
        d = weights * (C @ (R @ g))  # (n,) degrees after the alpha normalisation
        _check_nystrom_positive(d, "degrees", C)
        root_f = weights / np.sqrt(d)  # (n,)
        G = np.zeros((C.shape[1], C.shape[1]))  # C^T diag(w^2 / d) C
        for rows in _row_slices(len(C), _chunk_rows(C.shape[1])):
            scaled = C[rows] * root_f[rows, None]  # (b, m)
            G += scaled.T @ scaled
        M = R.T @ G @ R  # (r, r)
        total = g @ g  # sum_i d_i
        values, V = _top_eigenpairs(
            0.5 * (M + M.T), self.n_components, random_state, deflate=g / np.sqrt(total)
        )
        self._check_eigenvalues(values)
        self.eigenvalues_ = values
        numerator = (R @ V) * (np.sqrt(total) / np.sqrt(values))  # (m, k)
        self._denominator = R @ g  # (m,)
        psi = (C @ numerator) / (C @ self._denominator)[:, None]  # (n, k)
        flips = _sign_flips(psi)
        self._numerator = numerator * flips
        return psi * flips

    def _check_eigenvalues(self, values):
        """Refuse eigenvalues at round-off level, and negative ones with a fractional t."""
        small = np.flatnonzero(np.abs(values) < _EIGEN_RTOL)  # the ones before small[0] pass
        if small.size:
            fewer = f"Ask for n_components={small[0]} or fewer, or use" if small[0] else "Use"
            raise ValueError(
                f"{small.size} of the {len(values)} leading nontrivial eigenvalues of the "
                f"Markov matrix are below {_EIGEN_RTOL:g} in magnitude (its largest is 1), "
                "at round-off level: their eigenvectors are noise, and transform would divide "
                f"by them. {fewer} a narrower kernel (smaller epsilon): this one is too wide "
                "to tell the points apart, or they are (nearly) identical"
            )
        if np.any(values < 0) and float(self.t) != int(self.t):
            raise ValueError(
                "negative eigenvalues (a k-NN graph is not positive definite) need an integer t"
            )

    def _extend_graph(self, X, Z):
        weighted_psi = self._weights[:, None] * self._psi  # (n, k)
        if self.n_neighbors is None:
            blocks = _kernel_blocks(self.kernel_, X, self.X_fit_)
        else:
            blocks = [(slice(0, len(X)), self._graph.rows(X))]  # sparse (b, n)
        for rows, K in blocks:  # (b, n)
            _check_nonnegative(K)
            denominator = np.asarray(K @ self._weights).ravel()  # (b,)
            _check_reachable(denominator, rows)
            Z[rows] = np.asarray(K @ weighted_psi) / denominator[:, None]
        Z /= self.eigenvalues_

    def _extend_landmarks(self, X, Z):
        for rows, C in _kernel_blocks(self.kernel_, X, self.landmarks_):  # (b, m)
            _check_nonnegative(C)
            denominator = C @ self._denominator  # (b,)
            _check_reachable(denominator, rows)
            Z[rows] = (C @ self._numerator) / denominator[:, None]


def _check_nonnegative(affinities):
    """Raise for negative affinities (dense or sparse): they are no random walk's weights."""
    smallest = affinities.min()
    if smallest < 0:
        raise ValueError(
            f"the kernel gives negative affinities (down to {smallest:.3g}): a diffusion map "
            "needs non-negative affinities, the weights of a random walk. Use a kernel that "
            "is non-negative on these data (TanimotoKernel is on bits and counts, not on "
            "real-valued features), or KernelPCAEmbedding, which needs no such sign"
        )


def _check_nystrom_positive(sums, name, C):
    """Raise for points whose Nyström row sums or degrees (sums, shape (n,)) are not positive.

    ``C = k(X, L)`` of shape (n, m) tells how close the offending points come to a landmark.
    """
    bad = np.flatnonzero(~(sums > 0))
    if bad.size:
        raise ValueError(
            f"the Nyström kernel gives points {bad[:5].tolist()} ({bad.size} in all) "
            f"non-positive {name}: their largest affinities to a landmark, "
            f"{np.array2string(C[bad[:5]].max(axis=1), precision=1)}, are too small for "
            "k(x, L) W^+ k(L, .) to approximate their affinities. Widen the kernel (a larger "
            "epsilon: the default, the median squared distance from a landmark to its "
            f"{EPSILON_NEIGHBORS}th-nearest, narrows as landmarks are added), add landmarks "
            "at a fixed width, or leave such outlying points out of the fit"
        )


def _check_reachable(denominator, rows):
    """Raise for new points whose transition probabilities cannot be normalised."""
    bad = np.flatnonzero(~(denominator > 0))
    if bad.size:
        raise ValueError(
            f"points {(bad[:5] + rows.start).tolist()} have no positive affinity "
            "to the training data, they are out of the kernel's reach: widen "
            "the kernel (larger epsilon) or add such points to the training set"
        )


class KernelPCAEmbedding(_KernelEmbedding):
    """Kernel PCA on the same affinities as :class:`DiffusionMap`, for comparison.

    The centred kernel matrix is diagonalised: the baseline of "Scaling Kernel Embeddings,
    Pt. 1", which the diffusion map renormalises. Dense mode delegates to
    :class:`sklearn.decomposition.KernelPCA` with ``kernel='precomputed'``; landmark mode is
    the blog post's ``kpca_nystrom_embed``: PCA of the Nyström features ``phi(x) = k(x, L)
    W^{-1/2}``. Coordinates are the principal scores ``sqrt(eigenvalue) u`` (scikit-learn's
    convention), with the entry of largest magnitude of each column positive.

    Parameters
    ----------
    n_components : int
    kernel : 'gaussian' or callable
        As in :class:`DiffusionMap`.
    epsilon : float, optional
        Width of the Gaussian kernel, default :func:`median_knn_epsilon`.
    n_landmarks : int, optional
        Landmark (Nyström) approximation with this many landmarks.
    random_state : int, RandomState or None

    Attributes
    ----------
    eigenvalues_ : array of shape (n_components,)
        Leading eigenvalues of the centred (approximate) kernel matrix.
    embedding_ : array of shape (n_samples, n_components)
    kernel_, epsilon_, landmarks_, landmark_indices_
        As in :class:`DiffusionMap`.

    References
    ----------
    "Scaling Kernel Embeddings, Pt. 1" (``kpca_nystrom_embed``) and ref. [3] of
    :mod:`asebo.learn.diffusion`.
    """

    def __init__(
        self, n_components=2, kernel="gaussian", epsilon=None, n_landmarks=None, random_state=None
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.epsilon = epsilon
        self.n_landmarks = n_landmarks
        self.random_state = random_state

    def fit(self, X, y=None):
        """Compute the kernel principal components of X; returns self."""
        X = self._validate_input(X, reset=True)
        self._check_common_params(len(X))
        random_state = check_random_state(self.random_state)
        if self.n_landmarks is None:
            scores = self._fit_dense(X, random_state)
        else:
            scores = self._fit_landmarks(X, random_state)
        self._flips = _sign_flips(scores)  # (k,)
        self.embedding_ = scores * self._flips  # (n, k)
        self._n_features_out = self.n_components
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the principal scores of the training points."""
        return self.fit(X).embedding_

    def transform(self, X):
        """Principal scores of new points (the kernel PCA projection).

        Parameters
        ----------
        X : array of shape (n_queries, ...)

        Returns
        -------
        array of shape (n_queries, n_components)
        """
        check_is_fitted(self, "embedding_")
        X = self._validate_input(X, reset=False)
        Z = np.empty((len(X), self.n_components))
        if self.n_landmarks is None:
            for rows, K in _kernel_blocks(self.kernel_, X, self.X_fit_):  # (b, n)
                Z[rows] = self._kpca.transform(K)
        else:
            for rows, C in _kernel_blocks(self.kernel_, X, self.landmarks_):  # (b, m)
                Z[rows] = C @ self._coef - self._offset
        return Z * self._flips

    def _fit_dense(self, X, random_state):
        self.kernel_, self.epsilon_ = self._resolve_kernel(X, EPSILON_NEIGHBORS)
        self.X_fit_ = X
        self._kpca = KernelPCA(
            n_components=self.n_components, kernel="precomputed", random_state=random_state
        )
        scores = self._kpca.fit_transform(_kernel_matrix(self.kernel_, X, X))  # (n, k)
        self.eigenvalues_ = self._kpca.eigenvalues_
        return scores

    def _fit_landmarks(self, X, random_state):
        """PCA of the centred Nyström features, through r x r matrices only."""
        R = self._landmark_basis(X, random_state)  # (m, r)
        C = _kernel_matrix(self.kernel_, X, self.landmarks_)  # (n, m)
        mean = C.mean(axis=0)  # (m,)
        G = C.T @ C - len(C) * np.outer(mean, mean)  # (m, m) centred scatter
        values, V = _top_eigenpairs(R.T @ (0.5 * (G + G.T)) @ R, self.n_components, random_state)
        self.eigenvalues_ = values
        self._coef = R @ V  # (m, k)
        self._offset = mean @ self._coef  # (k,)
        return C @ self._coef - self._offset
