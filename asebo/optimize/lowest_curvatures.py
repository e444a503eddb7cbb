"""The model's lowest curvatures and its Newton decrement from products of its Hessian
with directions: the check at convergence under a prior calculator.

Under a prior calculator every gradient of the posterior mean costs a prior call, and
the whole Hessian by central differences ``2f`` of them for ``f`` free coordinates
(:func:`asebo.optimize.model_hessian.posterior_hessian`). The check at convergence
reads only the lowest curvatures (the sign of the lowest, every negative one) and the
quadratic's drop ``g^T H_+^{-1} g / 2`` over the positive modes
(:meth:`asebo.optimize.model_hessian.ModelCurvature.quadratic_drop`). Both come from
one subspace grown as in Davidson's method (E. R. Davidson, *J. Comput. Phys.* 17, 87
(1975)): the Rayleigh–Ritz pairs of the Hessian in the subspace, each wanted pair's
residual ``H v - k v`` and the Galerkin Newton step's residual preconditioned by Lindh's
model Hessian (R. Lindh et al., *Chem. Phys. Lett.* 241, 423 (1995)) and added, until
the residuals are small; as Sella finds a saddle's lowest mode (E. D. Hermes et al.,
*J. Chem. Theory Comput.* 18, 6974 (2022)). Each product is the central difference of
the posterior gradient along a direction: two prior calls. The subspace spans at most
the free coordinates less the rigid motions, where the Ritz pairs are the Hessian's
own: the cost is bounded by the whole Hessian's.
"""

import numpy as np

from asebo.model.lindh import LindhModel
from asebo.optimize.model_hessian import (
    NOISY_STEP,
    ModelCurvature,
    curvature_uncertainties,
    in_batches,
)

BLOCK = 4
"""The lowest modes of the preconditioner the subspace starts from."""
RESIDUAL = 1e-2
"""eV/Å²: the norm of ``H v - k v`` below which a unit Ritz pair ``(k, v)`` is converged;
its curvature is then within ``RESIDUAL**2`` over the gap to the next (Parlett, *The
Symmetric Eigenvalue Problem*, SIAM (1998), theorem 11.7.1)."""
DROP_ERROR = 1e-4
"""eV: the bound ``|r|^2 / (2 k_min)`` on the error of the Galerkin Newton decrement
(``r`` its residual, ``k_min`` the lowest positive Ritz curvature) below which it is
converged, a thirtieth of the smallest drop the check acts on."""
DROP_STALL = 1e-5
"""eV: a rise of the Galerkin Newton decrement below which, over one growth of the
subspace, it is converged too. The decrement rises towards the true one as the
subspace grows (it is the energy norm of the Galerkin step, which the larger subspace
can only raise), while the residual of products differenced from a prior calculator's
forces stops falling at their noise, where the bound above stays loose."""
SHIFT = 0.05
"""eV/Å² added to the preconditioner's diagonal: Lindh's model Hessian is only
semidefinite (the rigid motions, a torsion left out)."""
INDEPENDENT = 1e-3
"""A new direction whose norm after orthogonalisation against the subspace falls below
this fraction of its own is already spanned."""


class HessianProducts:
    """Products of the posterior mean's Hessian with directions in ``basis`` coordinates:
    the central differences of its gradient over :data:`NOISY_STEP` Å, two prior calls
    each.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted.
    positions : array (n, 3)
    basis : array (3n, k)
        Orthonormal: the free coordinates less the rigid motions.

    Attributes
    ----------
    count : int
        Products taken.
    """

    def __init__(self, gp, positions, basis):
        self.gp, self.positions, self.basis = gp, np.asarray(positions, dtype=np.float64), basis
        self.count = 0

    def __call__(self, vectors):
        """``B^T H B V`` (k, p) for ``vectors`` ``V`` (k, p)."""
        n, p = len(self.positions), vectors.shape[1]
        directions = (self.basis @ vectors).T.reshape(p, n, 3)  # (p, n, 3)
        ends = np.concatenate(
            [self.positions + NOISY_STEP * directions, self.positions - NOISY_STEP * directions]
        )  # (2p, n, 3)
        gradients = np.concatenate(
            [self.gp.predict(chunk, return_gradient=True)[1] for chunk in in_batches(ends)]
        ).reshape(2 * p, 3 * n)
        self.count += p
        return self.basis.T @ ((gradients[:p] - gradients[p:]) / (2 * NOISY_STEP)).T


def lindh_preconditioner(positions, numbers, basis):
    """``B^T H_L B + SHIFT I`` (k, k): Lindh's model Hessian (its Gauss–Newton form,
    :meth:`asebo.model.lindh.LindhModel.gauss_newton_hessian`) at ``positions`` (n, 3)
    in ``basis`` (3n, k), shifted to be positive definite."""
    model = LindhModel(positions, numbers)
    hessian = model.gauss_newton_hessian(positions)  # (3n, 3n)
    return basis.T @ hessian @ basis + SHIFT * np.eye(basis.shape[1])


class LowestSubspace:
    """The subspace of :func:`lowest_model_curvature`: its orthonormal directions, the
    Hessian's products with them, and the Ritz pairs and Newton step they give.

    Parameters
    ----------
    products : callable
        Directions (k, p) -> the Hessian's products with them (k, p): a
        :class:`HessianProducts`.
    preconditioner : array (k, k)
        Positive definite, near the Hessian.
    gradient : array (k,)
        The energy's gradient at the configuration, in the basis.
    """

    def __init__(self, products, preconditioner, gradient):
        self.products, self.gradient = products, gradient
        self.drop = None  # the Newton decrement at the last growth, eV
        self.solve = _cholesky_solver(preconditioner)
        k = len(gradient)
        self.vectors = np.zeros((k, 0))  # (k, s)
        self.images = np.zeros((k, 0))  # (k, s): the Hessian times each vector
        start = np.linalg.eigh(preconditioner)[1][:, : min(BLOCK, k)]  # (k, b)
        self.extend(np.column_stack([start, self.solve(gradient)]))

    @property
    def full(self):
        """Whether the subspace spans every coordinate: its Ritz pairs are exact."""
        return self.vectors.shape[1] >= self.vectors.shape[0]

    def extend(self, candidates):
        """Orthonormalise ``candidates`` (k, c) against the subspace (twice, classical
        Gram–Schmidt), keep the independent ones and take their products."""
        kept = []
        for column in candidates.T:
            norm = np.linalg.norm(column)
            if norm == 0.0:
                continue
            basis = np.column_stack([self.vectors, *kept]) if kept else self.vectors
            for _ in range(2):
                column = column - basis @ (basis.T @ column)
            if np.linalg.norm(column) > INDEPENDENT * norm:
                kept.append(column / np.linalg.norm(column))
        if kept:
            new = np.column_stack(kept)  # (k, c')
            self.vectors = np.column_stack([self.vectors, new])
            self.images = np.column_stack([self.images, self.products(new)])
        return len(kept)

    def ritz(self):
        """Curvatures (s,) ascending and unit Ritz vectors (k, s) of the subspace."""
        projected = self.vectors.T @ self.images
        curvatures, coefficients = np.linalg.eigh(0.5 * (projected + projected.T))
        return curvatures, self.vectors @ coefficients

    def wanted(self, curvatures):
        """How many of the lowest Ritz pairs the check reads: every non-positive one and
        the lowest positive."""
        return min(len(curvatures), int(np.sum(curvatures <= 0.0)) + 1)

    def newton(self, curvatures, vectors):
        """The Galerkin Newton step over the positive Ritz pairs, its drop
        ``g_+^T x / 2`` (eV) and residual ``g_+ - H x`` (k,), ``g_+`` the gradient less
        its part along the non-positive Ritz vectors."""
        positive = curvatures > 0.0
        along = vectors.T @ self.gradient  # (s,)
        step = vectors[:, positive] @ (along[positive] / curvatures[positive])  # (k,)
        kept = self.gradient - vectors[:, ~positive] @ along[~positive]
        images = self.images @ (self.vectors.T @ step)  # H x, x in the subspace
        return 0.5 * float(kept @ step), kept - images

    def grow(self):
        """Add the preconditioned residuals of the unconverged wanted pairs and of the
        Newton step (until :data:`DROP_ERROR` bounds its error or its decrement rose
        less than :data:`DROP_STALL`); False where every one is converged or nothing new
        is spanned."""
        curvatures, vectors = self.ritz()
        w = self.wanted(curvatures)
        pairs = vectors[:, :w]  # (k, w)
        residuals = self.images @ (self.vectors.T @ pairs) - pairs * curvatures[:w]  # (k, w)
        open_pairs = np.linalg.norm(residuals, axis=0) > RESIDUAL
        candidates = [self.solve(r) for r in residuals[:, open_pairs].T]
        drop, newton_residual = self.newton(curvatures, vectors)
        positive = curvatures[curvatures > 0.0]
        rising = self.drop is None or drop - self.drop > DROP_STALL
        self.drop = drop
        loose = len(positive) and newton_residual @ newton_residual / (2 * positive[0]) > DROP_ERROR
        if loose and rising:
            candidates.append(self.solve(newton_residual))
        if not candidates or self.full:
            return False
        return self.extend(np.column_stack(candidates)) > 0


def _cholesky_solver(matrix):
    """``v -> matrix^{-1} v`` for a positive definite ``matrix``."""
    factor = np.linalg.cholesky(matrix)

    def solve(vector):
        return np.linalg.solve(factor.T, np.linalg.solve(factor, vector))

    return solve


def lowest_model_curvature(gp, positions, numbers, gradient, basis):
    """The :class:`asebo.optimize.model_hessian.ModelCurvature` of the lowest curvatures of
    a fitted GP at ``positions``, its Hessian unformed.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted.
    positions : array (n, 3)
        Best where energy and forces are observed there.
    numbers : array (n,)
        Atomic numbers, for the preconditioner.
    gradient : array (n, 3)
        The energy's gradient at ``positions``, eV/Å (minus the forces observed there):
        the Newton decrement's.
    basis : array (3n, k)
        :func:`asebo.optimize.model_hessian.internal_basis` of ``positions``.

    Returns
    -------
    ModelCurvature
        ``curvatures`` and ``modes`` of the non-positive Ritz pairs and the lowest
        positive one, their uncertainties, ``hessian`` None, ``drop`` the Newton
        decrement at ``gradient`` and ``products`` the Hessian's products.
    """
    positions = np.asarray(positions, dtype=np.float64)
    products = HessianProducts(gp, positions, basis)
    preconditioner = lindh_preconditioner(positions, numbers, basis)
    subspace = LowestSubspace(products, preconditioner, basis.T @ np.ravel(gradient))
    while subspace.grow():
        pass
    curvatures, vectors = subspace.ritz()
    drop, _ = subspace.newton(curvatures, vectors)
    w = subspace.wanted(curvatures)
    modes = (basis @ vectors[:, :w]).T  # (w, 3n)
    return ModelCurvature(
        hessian=None,
        curvatures=curvatures[:w],
        modes=modes,
        uncertainties=curvature_uncertainties(gp, positions, modes),
        drop=(np.ravel(gradient).copy(), drop),
        products=_cartesian_products(products, basis),
    )


def _cartesian_products(products, basis):
    """``D -> H D`` (3n, p) for directions ``D`` (3n, p) in the span of ``basis``."""

    def multiply(directions):
        return basis @ products(basis.T @ directions)

    return multiply
