r"""Gaussian process regression on energies and forces of one molecule.

The GP models the energy ``E(x)`` of configurations ``x`` (``(n, 3)`` positions) with
a derivative kernel, so each observation contributes its energy and its ``3n``
gradient components ``-F`` (seed 003, eqs. 11 and 34; seed 004, the GP equations).
With the signal variance ``s^2`` and the kernel's joint covariance ``K``,

.. math:: \mu(x) = m(x) + s^2 c(x)^\top (s^2 K + \Lambda)^{-1} (y - m), \qquad
          \sigma^2(x) = s^2 - s^4 c(x)^\top (s^2 K + \Lambda)^{-1} c(x),

where ``c(x)`` is the covariance of ``E(x)`` with the observed energies and
gradients, ``\Lambda`` holds the noise variances (``lambda`` for energies,
``lambda_deriv`` for gradients, seed 003) and ``m`` is the prior mean: a constant
(the largest or the mean observed energy) or an ASE calculator, whose energy and
forces the GP then corrects (Δ-learning, seed 004's last slides). A calculator
prior is shifted by the mean difference of observed and prior energies: two methods
differ by hundreds of eV in their reference states, and left in the residual that
constant would set ``s`` and, through it, the noise.

Hyperparameters: the kernel's ``gamma`` maximises the log marginal likelihood
(seed 004, eqs. 27-29) with ``s^2`` profiled out in closed form; noise is set
relative to ``s``. The SVD kernel is improper (seed 003): when the covariance is not
positive definite, jitter grows on its diagonal until a Cholesky factor exists, and
``jitter_`` reports how much was needed.
"""

import numpy as np
import torch
from scipy.optimize import minimize_scalar

from asebo.kernels.euclidean import cartesian_rbf_blocks_batched
from asebo.kernels.operators import JointStructure
from asebo.kernels.svd import svd_kernel_blocks_batched

KERNELS = ("svd", "cartesian")


def _cross_blocks(kernel, x, positions, gamma, proper):
    """Covariance of ``E(x)`` with ``[E_j, grad E_j]``, (b, m (3n + 1)), differentiable in x."""
    if kernel == "svd":
        k, _, dk_dZ = svd_kernel_blocks_batched(x, positions, gamma, proper, second=False)
    else:
        k, _, dk_dZ, _ = cartesian_rbf_blocks_batched(x, positions, gamma)
    b, m = k.shape
    return torch.cat([k[..., None], dk_dZ.reshape(b, m, -1)], dim=-1).reshape(b, -1)


class _CalculatorEnergy(torch.autograd.Function):
    """Energy of an ASE calculator at positions (n, 3), with ``-forces`` as gradient."""

    @staticmethod
    def forward(ctx, positions, prior):
        energy, forces = prior.energy_and_forces(positions.detach().numpy())
        ctx.save_for_backward(torch.as_tensor(-forces))
        return torch.as_tensor(energy, dtype=torch.float64)

    @staticmethod
    def backward(ctx, grad_energy):
        (gradient,) = ctx.saved_tensors
        return grad_energy * gradient, None


class CalculatorPrior:
    """An ASE calculator as the GP's prior mean (Δ-learning, seed 004).

    Parameters
    ----------
    calculator : ase.calculators.calculator.Calculator
        A cheap method (GFN1-xTB, say) whose energy and forces the GP corrects.
    atoms : ase.Atoms
        The molecule: numbers, cell and boundary conditions of every evaluation.
    """

    def __init__(self, calculator, atoms):
        self.calculator = calculator
        self.atoms = atoms.copy()
        self.atoms.constraints = []
        self.atoms.calc = calculator
        self.ncalls = 0
        self._cache = {}

    def energy_and_forces(self, positions):
        """Prior energy () and forces (n, 3) at positions (n, 3), each computed once."""
        key = np.asarray(positions, dtype=np.float64).tobytes()
        if key not in self._cache:
            self._cache[key] = self._compute(positions)
        energy, forces = self._cache[key]
        return energy, forces.copy()

    def _compute(self, positions):
        self.atoms.set_positions(positions)
        energy = self.atoms.get_potential_energy()
        forces = self.atoms.get_forces()
        self.ncalls += 1
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            raise ValueError("the prior calculator returned NaN or inf energy or forces")
        return float(energy), np.array(forces)

    def energy(self, positions):
        """Prior energy at a torch tensor of positions (n, 3), differentiable."""
        return _CalculatorEnergy.apply(positions, self)


class EnergyForceGP:
    """GP on energies and forces of configurations of one molecule.

    Parameters
    ----------
    kernel : {'svd', 'cartesian'}
        The rotation-invariant SVD kernel (molecules) or the Gaussian kernel on
        Cartesian positions (periodic systems).
    gamma : float
        Kernel inverse squared length scale (``k = exp(-gamma d / 2)``, Å⁻²); the
        starting point when ``fit_gamma``.
    fit_gamma : bool
        Choose ``gamma`` by the marginal likelihood of the latest ``hyper_window``
        observations at each :meth:`fit`, then double it (up to the upper bound)
        while the covariance of all the observations needs more jitter than the
        energy noise to factorise.
    gamma_bounds : (float, float)
        Search interval of ``gamma``.
    prior : {'max', 'mean'}, float, or CalculatorPrior
        Prior mean of the energy. A calculator prior is shifted by the mean of
        ``E - E_prior`` over the observations (``prior_offset_``).
    energy_noise, gradient_noise : float
        Noise standard deviations relative to the signal scale ``s`` (energies) and
        ``s sqrt(gamma)`` (gradients): ``lambda`` and ``lambda_deriv`` of seed 003.
    proper : bool
        SVD kernel aligned by proper rotations only.
    hyper_window : int
        The marginal likelihood uses the latest ``hyper_window`` observations.
    max_size : int
        Largest covariance the posterior factorises: beyond it, the posterior
        conditions on the configurations nearest the lowest-energy one (``selected_``).

    Attributes
    ----------
    gamma_, outputscale_ : float
        Fitted kernel parameter and signal variance ``s^2``.
    jitter_ : float
        Diagonal added beyond the noise to make the covariance positive definite,
        relative to its mean diagonal (0 when none was needed).
    """

    def __init__(self, kernel="svd", gamma=6.0, fit_gamma=True, gamma_bounds=(0.05, 50.0),
                 prior="max", energy_noise=2e-3, gradient_noise=2e-3, proper=True,
                 hyper_window=6, max_size=1500):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        self.kernel = kernel
        self.gamma = gamma
        self.fit_gamma = fit_gamma
        self.gamma_bounds = gamma_bounds
        self.prior = prior
        self.energy_noise = energy_noise
        self.gradient_noise = gradient_noise
        self.proper = proper
        self.hyper_window = hyper_window
        self.max_size = max_size

    # ---- data and prior -------------------------------------------------------------
    def _prior_at_observations(self, positions, energies, forces):
        m = len(energies)
        if isinstance(self.prior, CalculatorPrior):
            values = [self.prior.energy_and_forces(p) for p in positions]
            prior_energies = np.array([v[0] for v in values])  # (m,)
            # the two methods' energies differ by a large constant (reference states,
            # core electrons): the GP learns the residual around its mean
            self.prior_offset_ = float(np.mean(energies - prior_energies))
            return prior_energies + self.prior_offset_, np.stack([-v[1] for v in values])
        if self.prior == "max":
            constant = float(np.max(energies))
        elif self.prior == "mean":
            constant = float(np.mean(energies))
        elif isinstance(self.prior, (int, float)):
            constant = float(self.prior)
        else:
            raise ValueError("prior must be 'max', 'mean', a number or a CalculatorPrior")
        self.prior_constant_ = constant
        return np.full(m, constant), np.zeros_like(forces)

    def _targets(self, energies, gradients, prior_energies, prior_gradients):
        m = len(energies)
        residual_e = energies - prior_energies  # (m,)
        residual_g = (gradients - prior_gradients).reshape(m, -1)  # (m, 3n)
        return torch.as_tensor(np.concatenate([residual_e[:, None], residual_g], axis=1).ravel())

    def _noise(self, m, n, gamma):
        per_config = torch.cat([torch.tensor([self.energy_noise ** 2]),
                                torch.full((3 * n,), self.gradient_noise ** 2 * gamma)])
        return per_config.repeat(m).to(torch.float64)  # (m (3n+1),), relative to s^2

    # ---- marginal likelihood --------------------------------------------------------
    def _profile_nll(self, log_gamma, select, y):
        """Negative log marginal likelihood per datum with ``s^2`` profiled out (seed 004, eq. 28).

        ``select`` indexes the configurations of the structure that ``y`` belongs to.
        """
        gamma = float(np.exp(log_gamma))
        m, n = len(select), self._structure.positions.shape[1]
        K = self._structure.dense(gamma, select)
        K.diagonal().add_(self._noise(m, n, gamma))
        factor, _ = _robust_cholesky(K)
        alpha = torch.cholesky_solve(y[:, None], factor)[:, 0]
        size = y.shape[0]
        outputscale = float(y @ alpha) / size
        logdet = 2.0 * torch.log(torch.diagonal(factor)).sum().item()
        return 0.5 * (np.log(max(outputscale, 1e-300)) + logdet / size)

    def _fit_gamma(self, y, m, n_atoms):
        window = min(self.hyper_window, m)
        select = torch.arange(m - window, m)
        y_recent = y[-window * (3 * n_atoms + 1):]
        low, high = np.log(self.gamma_bounds[0]), np.log(self.gamma_bounds[1])
        result = minimize_scalar(self._profile_nll, bounds=(low, high), method="bounded",
                                 args=(select, y_recent), options={"xatol": 0.1})
        # Brent's bounded search never evaluates the bounds themselves
        candidates = {result.x: result.fun}
        for end in (low, high):
            candidates[end] = self._profile_nll(end, select, y_recent)
        return float(np.exp(min(candidates, key=candidates.get)))

    def _update_structure(self, P):
        """Reuse the stored kernel structure when ``P`` extends the configurations seen."""
        structure = getattr(self, "_structure", None)
        seen = len(structure) if structure is not None else 0
        if (structure is None or seen > len(P) or structure.positions.shape[1:] != P.shape[1:]
                or not torch.equal(structure.positions, P[:seen])):
            structure, seen = JointStructure(self.kernel, self.proper), 0
        self._structure = structure.extend(P[seen:])

    def _select(self, energies, n_atoms):
        """Indices of the configurations to condition on: all of them, or, when their
        covariance would exceed ``max_size`` rows, those nearest the lowest-energy one."""
        m = len(energies)
        count = max(2, self.max_size // (3 * n_atoms + 1))
        if m <= count:
            return torch.arange(m)
        distance = self._structure.distance[int(np.argmin(energies))].clone()
        distance[-1] = -1.0  # the latest observation always stays
        return torch.sort(torch.argsort(distance)[:count]).values

    # ---- fit and predict ------------------------------------------------------------
    def fit(self, positions, energies, forces):
        """Condition on observed energies and forces.

        Parameters
        ----------
        positions : array (m, n, 3)
        energies : array (m,)
        forces : array (m, n, 3)
            Forces, ``-dE/dx``.

        Returns
        -------
        self
        """
        positions = np.asarray(positions, dtype=np.float64)
        energies = np.asarray(energies, dtype=np.float64)
        forces = np.asarray(forces, dtype=np.float64)
        if positions.ndim != 3 or positions.shape[-1] != 3:
            raise ValueError(f"positions must have shape (m, n_atoms, 3), got {positions.shape}")
        m, n, _ = positions.shape
        if energies.shape != (m,) or forces.shape != positions.shape:
            raise ValueError(f"expected energies ({m},) and forces {positions.shape}, got "
                             f"{energies.shape} and {forces.shape}")
        for name, values in (("positions", positions), ("energies", energies),
                             ("forces", forces)):
            if not np.isfinite(values).all():
                raise ValueError(f"{name} contain NaN or inf: remove that observation")
        prior_e, prior_g = self._prior_at_observations(positions, energies, forces)
        y = self._targets(energies, -forces, prior_e, prior_g)
        P = torch.as_tensor(positions)
        self._update_structure(P)
        gamma = self._fit_gamma(y, m, n) if self.fit_gamma else float(self.gamma)
        select = self._select(energies, n)
        y = y.reshape(m, -1)[select].reshape(-1)
        factor, jitter = self._factorize(gamma, select, n)
        if self.fit_gamma:
            # gamma comes from the latest configurations; over all of them the improper
            # kernel can be indefinite at long length scales, and jitter beyond the noise
            # would stop the posterior from interpolating: shorten the length scale
            while jitter > self.energy_noise ** 2 and gamma < self.gamma_bounds[1]:
                gamma = min(2.0 * gamma, self.gamma_bounds[1])
                factor, jitter = self._factorize(gamma, select, n)
        alpha = torch.cholesky_solve(y[:, None], factor)[:, 0]
        outputscale = max(float(y @ alpha) / y.shape[0], 1e-12)
        self.gamma_, self.outputscale_, self.jitter_ = gamma, outputscale, jitter
        self.selected_ = select  # (m',): the configurations the posterior conditions on
        self.positions_ = P[select]  # (m', n, 3)
        # s^2 K + Lambda = s^2 (K + Lambda / s^2): s^2 cancels in the mean
        self._factor = factor  # (N, N): Cholesky factor of K + Lambda / s^2
        self._alpha = alpha  # (N,): (K + Lambda / s^2)^{-1} (y - m)
        return self

    def _factorize(self, gamma, select, n_atoms):
        """Cholesky factor of ``K + Lambda / s^2`` on ``select`` and the jitter it needed."""
        K = self._structure.dense(gamma, select)
        K.diagonal().add_(self._noise(len(select), n_atoms, gamma))
        return _robust_cholesky(K)

    def _prior_mean(self, x):
        if isinstance(self.prior, CalculatorPrior):
            return torch.stack([self.prior.energy(xi) for xi in x]) + self.prior_offset_
        return torch.full((x.shape[0],), self.prior_constant_, dtype=torch.float64)

    def posterior(self, x):
        """Posterior mean and variance of the energy at configurations x.

        Parameters
        ----------
        x : tensor (b, n, 3)
            Positions, float64; gradients flow back to them through autograd.

        Returns
        -------
        mean : tensor (b,)
        variance : tensor (b,)
        """
        c = _cross_blocks(self.kernel, x, self.positions_, self.gamma_, self.proper)  # (b, N)
        mean = self._prior_mean(x) + c @ self._alpha
        v = torch.linalg.solve_triangular(self._factor, c.T, upper=False)  # (N, b)
        variance = self.outputscale_ * (1.0 - (v ** 2).sum(dim=0))
        return mean, variance.clamp_min(1e-12 * self.outputscale_)

    def predict(self, positions, return_std=False, return_gradient=False):
        """Posterior mean energy (and std, and mean gradient) at (b, n, 3) or (n, 3) positions."""
        x = torch.as_tensor(np.asarray(positions, dtype=np.float64))
        single = x.ndim == 2
        x = x[None] if single else x
        x.requires_grad_(return_gradient)
        mean, variance = self.posterior(x)
        out = [mean.detach().numpy()]
        if return_std:
            out.append(np.sqrt(variance.detach().numpy()))
        if return_gradient:
            (grad,) = torch.autograd.grad(mean.sum(), x)
            out.append(grad.numpy())
        out = [o[0] for o in out] if single else out
        return out[0] if len(out) == 1 else tuple(out)


def _robust_cholesky(matrix, max_tries=12):
    """Cholesky factor of a symmetric matrix, adding diagonal jitter until it exists.

    The improper SVD kernel can make the covariance indefinite (seed 003). The
    jitter starts at ``1e-6`` of the mean diagonal and triples until the
    factorisation succeeds: a uniform shift keeps the solve well conditioned, where
    raising only the negative eigenvalues to a floor would amplify the data along
    them. Returns the lower factor and the jitter relative to the mean diagonal
    (0 when none was needed). ``matrix`` is not modified.
    """
    factor, info = torch.linalg.cholesky_ex(matrix)
    if info.item() == 0:
        return factor, 0.0
    diagonal = matrix.diagonal().clone()
    scale = float(diagonal.mean())
    work = matrix.clone()
    for attempt in range(max_tries):
        relative = 1e-6 * 3.0 ** attempt
        work.diagonal().copy_(diagonal + relative * scale)
        factor, info = torch.linalg.cholesky_ex(work)
        if info.item() == 0:
            return factor, relative
    relative = float(-torch.linalg.eigvalsh(matrix).min()) / scale + 1e-6
    work.diagonal().copy_(diagonal + relative * scale)
    return torch.linalg.cholesky(work), relative
