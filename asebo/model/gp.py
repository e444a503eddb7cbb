r"""Gaussian process regression on energies and forces of one molecule.

The GP models the energy ``E(x)`` of configurations ``x`` (``(n, 3)`` positions) with
a derivative kernel, so each observation contributes its energy and its ``3n``
gradient components ``-F`` (Wong and Kolter, eqs. 11 and 34; Rasmussen and Williams,
ch. 2 and sec. 9.4). With the signal variance ``s^2`` and the kernel's joint covariance ``K``,

.. math:: \mu(x) = m(x) + s^2 c(x)^\top (s^2 K + \Lambda)^{-1} (y - m), \qquad
          \sigma^2(x) = s^2 - s^4 c(x)^\top (s^2 K + \Lambda)^{-1} c(x),

where ``c(x)`` is the covariance of ``E(x)`` with the observed energies and
gradients, ``\Lambda`` holds the noise variances (``lambda`` for energies,
``lambda_deriv`` for gradients, Wong and Kolter) and ``m`` is the prior mean: a
constant (the largest or the mean observed energy) or an ASE calculator, whose energy and
forces the GP then corrects (Δ-learning, Ramakrishnan et al. 2015). A calculator
prior is shifted by the mean difference of observed and prior energies: two methods
differ by hundreds of eV in their reference states, and left in the residual that
constant would set ``s`` and, through it, the noise.

Hyperparameters: the kernel's ``gamma`` maximises the log marginal likelihood
(Rasmussen and Williams, eq. 2.30) with ``s^2`` profiled out in closed form; noise is
set relative to ``s``. The SVD kernel is improper (Wong and Kolter): when the
covariance is not positive definite, jitter grows on its diagonal until a Cholesky
factor exists, and ``jitter_`` reports how much was needed.

At scale the joint covariance is never stored: the kernel structure keeps ``O(m^2 +
m n)`` numbers (:class:`asebo.kernels.operators.JointStructure`), a subset of at most
``max_size`` rows is factorised densely, the weights of every observation come from
preconditioned conjugate gradients with the structured product, and the posterior
mean, variance and their gradients are structured cross products, ``O(m n)`` per
configuration after the solve (docs/theory.md, "The GP at scale").
"""

import copy

import numpy as np
import torch
from scipy.optimize import minimize_scalar

from asebo.kernels.added_terms import CurvatureTerm, TrendTerm
from asebo.kernels.configuration import configuration_kernel
from asebo.kernels.joint import block_jacobi, energy_rows, joint_matmul
from asebo.kernels.operators import JointStructure, solve_joint
from asebo.kernels.prior_scale import PriorCurvature
from asebo.kernels.trend import LinearTrend
from asebo.model.observed_directions import ObservedDirections, ProjectedOperator
from asebo.model.priors import (  # noqa: F401  CalculatorPrior and the error: public here too
    CalculatorPrior,
    PriorCalculationError,
    constant_prior,
)
from asebo.model.regression import (
    SymmetricFactor,
    noise_vector,
    observation_rows,
    observation_vector,
    profiled_nll,
)


class EnergyForceGP:
    """GP on energies and forces of configurations of one molecule.

    Parameters
    ----------
    kernel : asebo.kernels.configuration.ConfigurationKernel or {'svd', 'cartesian'}
        The kernel on configurations, whose ``gamma``-free ``pair_geometry`` the
        joint covariance is built from: the rotation-invariant
        ``SVDKernel(proper=..., radial=...)`` or the Gaussian kernel on Cartesian
        positions, or on the features of ``metric``, ``CartesianKernel(radial=...)``
        (the optimizer's default for molecules). A name stands for the kernel with
        ``proper`` and ``radial`` (:func:`asebo.kernels.configuration_kernel`). The
        object's own ``gamma`` is not used: ``gamma`` below sets the length scale.
    gamma : float
        Kernel inverse squared length scale (``k = exp(-gamma d / 2)`` for the squared
        exponential, Å⁻²); the starting point when ``fit_gamma``.
    fit_gamma : bool
        Choose ``gamma`` by the marginal likelihood of the latest ``hyper_window``
        observations at each :meth:`fit`, then double it (up to the upper bound)
        while the covariance of all the observations needs more jitter than the
        energy noise to factorise.
    gamma_bounds : (float, float)
        Search interval of ``gamma``.
    prior : {'max', 'mean'}, float, or asebo.model.priors.Prior
        Prior mean of the energy: its own surface plus a constant fitted to the
        observations (``prior_offset_``): the highest or mean energy for a constant
        prior, the mean of ``E - E_prior`` for a calculator prior
        (:class:`asebo.model.priors.CalculatorPrior`).
    energy_noise, gradient_noise : float
        Noise standard deviations relative to the signal scale ``s`` (energies) and
        to the prior standard deviation of a gradient component, ``s sqrt(a(0))``
        (``s sqrt(gamma)`` for the squared exponential): ``lambda`` and
        ``lambda_deriv`` of Wong and Kolter.
    proper : bool, optional
        With ``kernel='svd'``: aligned by proper rotations only (the default) or by any
        orthogonal map. A kernel object holds its own: passing both is refused.
    hyper_window : int
        The marginal likelihood uses the latest ``hyper_window`` observations, fewer
        where their covariance would exceed half of ``max_size`` rows (it is
        factorised a dozen times per fit).
    max_size : int
        Largest covariance factorised densely. Up to it the posterior is exact; beyond
        it the mean conditions on every observation through conjugate gradients with
        the structured covariance where they converge, on the configurations nearest
        the lowest-energy one or the ``centre`` given to :meth:`fit` (``selected_``)
        where they do not, and the variance on ``selected_``.
    cg_tolerance : float
        Relative residual at which conjugate gradients stop; a solve that does not
        reach it falls back to the weights of ``selected_``.
    cg_max_iter : int
        At most this many conjugate-gradient iterations per fit; 0 conditions the
        mean, like the variance, on ``selected_`` only.
    radial : {'se', 'matern52'} or profile, optional
        With a kernel name: ``f`` of the kernel ``k = f(d)`` of the (aligned) squared
        distance, the squared exponential (the default) or the Matérn 5/2
        (:mod:`asebo.kernels.radial`). A kernel object holds its own: passing both is
        refused.
    metric : asebo.model.metric.InternalMetric or asebo.model.metric.HessianMetric, optional
        Features the kernel sees instead of the positions (with the Cartesian kernel):
        internal coordinates, or positions aligned onto a reference, scaled by a model
        Hessian. Energies and forces stay in Cartesian coordinates for the caller:
        observed gradients are mapped to the features, and posterior gradients back.
        A metric with more features than coordinates (the inverse distances) gives the
        bases of the directions a gradient fixes (``observation_bases``), and the GP
        observes each gradient along those only (:mod:`asebo.model.observed_directions`).
    trend : float
        With the Cartesian kernel: the kernel gains a linear trend in the features
        (or positions) measured from the lowest-energy observation
        (:class:`asebo.kernels.trend.LinearTrend`), whose slope variance is ``trend``
        times the prior variance of a gradient component of the radial kernel. The
        slope the observations share then carries beyond the length scale, where the
        radial kernel alone returns to the prior mean. 0 leaves it out.
    prior_curvature : float
        With a calculator prior: the model gains the prior's curvature part times a
        random scale (:class:`asebo.kernels.prior_scale.PriorCurvature`), whose
        gradients have ``prior_curvature`` times the prior variance of a gradient
        component of the radial kernel, for gradients the size of the prior's at
        the observations. A target stiffer or softer than its prior is then learned
        from the first two observations everywhere. 0 leaves it out.

    Attributes
    ----------
    gamma_, outputscale_ : float
        Fitted kernel parameter and signal variance ``s^2``.
    jitter_ : float
        Diagonal added beyond the noise to make the covariance positive definite,
        relative to its mean diagonal (0 when none was needed).
    selected_ : tensor (m',)
        The configurations the variance conditions on: all of them up to ``max_size``
        rows, else those nearest the lowest-energy one or :meth:`fit`'s ``centre``.
    solve_info_ : asebo.kernels.operators.SolveInfo or None
        How conjugate gradients solved over every observation (None: densely).
    hessians_ : dict
        The posterior Hessians of this fit computed so far, by configuration and free
        mask (:func:`asebo.optimize.model_hessian.posterior_hessian`); emptied by each fit.
    """

    def __init__(
        self,
        kernel="svd",
        gamma=6.0,
        fit_gamma=True,
        gamma_bounds=(0.05, 50.0),
        prior="max",
        energy_noise=2e-3,
        gradient_noise=2e-3,
        proper=None,
        hyper_window=12,
        max_size=1500,
        cg_tolerance=1e-6,
        cg_max_iter=50,
        radial=None,
        metric=None,
        trend=0.0,
        prior_curvature=0.0,
    ):
        shorthand = {"proper": proper, "radial": radial}
        self.kernel = configuration_kernel(
            kernel, **{name: value for name, value in shorthand.items() if value is not None}
        )
        self.gamma = gamma
        self.fit_gamma = fit_gamma
        self.gamma_bounds = gamma_bounds
        self.energy_noise = energy_noise
        self.gradient_noise = gradient_noise
        self.hyper_window = hyper_window
        self.max_size = max_size
        self.cg_tolerance = cg_tolerance
        self.cg_max_iter = cg_max_iter
        self.metric = metric
        self.trend = trend
        self.prior_curvature = prior_curvature
        self._check_settings()
        self.prior = prior
        self._directions = None  # the observed directions of the gradients, set by fit

    def _check_settings(self):
        """Refuse settings out of range, and a metric or a trend the kernel cannot take."""
        kernel = self.kernel
        if self.metric is not None and kernel.centred:
            raise ValueError(
                f"a metric gives the kernel features, not positions, which {kernel!r} would "
                "centre and align like atoms: use kernel='cartesian' (CartesianKernel)"
            )
        for name in ("trend", "prior_curvature", "energy_noise", "gradient_noise"):
            _check_number(name, getattr(self, name), minimum=0.0)
        _check_number("gamma", self.gamma, minimum=0.0, inclusive=False)
        _check_number("cg_tolerance", self.cg_tolerance, minimum=0.0, inclusive=False)
        bounds = self.gamma_bounds
        if not (
            isinstance(bounds, (tuple, list))
            and len(bounds) == 2
            and all(_is_number(b) and np.isfinite(b) and b > 0 for b in bounds)
            and bounds[0] < bounds[1]
        ):
            raise ValueError(
                f"gamma_bounds must be two increasing positive numbers (low, high), got {bounds!r}"
            )
        for name, minimum in (("hyper_window", 2), ("max_size", 1), ("cg_max_iter", 0)):
            value = getattr(self, name)
            whole = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            if not whole or value < minimum:
                raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
        if self.trend > 0 and kernel.centred:
            raise ValueError(
                f"a linear trend in the positions would break the rotation invariance of "
                f"{kernel!r}: use kernel='cartesian' (CartesianKernel, with an invariant "
                "metric) or trend=0"
            )

    # ---- data and prior -------------------------------------------------------------
    @property
    def prior(self):
        """The prior mean, an :class:`asebo.model.priors.Prior`; set it by name or object."""
        return self._prior

    @prior.setter
    def prior(self, prior):
        self._prior = constant_prior(prior)

    def _prior_at_observations(self, positions, energies):
        """Prior energies (m,) and gradients (m, n, 3) at the observations, offset
        included; sets ``prior_offset_``."""
        prior_energies, gradients = self.prior.energies_and_gradients(positions)  # (m,), (m, n, 3)
        self.prior_offset_ = self.prior.offset(energies, prior_energies)
        return prior_energies + self.prior_offset_, gradients

    def _targets(self, energies, gradients, prior_energies, prior_gradients):
        """Residuals of the observations to the prior, (m (3n+1),)."""
        return torch.as_tensor(
            observation_vector(energies - prior_energies, gradients - prior_gradients)
        )

    def _noise(self, m, n, gamma):
        """Noise variances relative to ``s^2``, (m (3n+1),)."""
        return torch.as_tensor(
            noise_vector(
                m,
                n,
                self.energy_noise**2,
                self.gradient_noise**2 * self.kernel.radial.slope_at_zero(gamma),
            )
        )

    def _added_terms(self, gamma):
        """The terms added to the configuration kernel at ``gamma``, in order: the linear
        trend and the prior's curvature, where they are on
        (:mod:`asebo.kernels.added_terms`). Their variances follow the radial kernel's
        gradient variance."""
        terms = []
        if self.trend != 0:
            trend = LinearTrend(self.trend * self.kernel.radial.slope_at_zero(gamma))
            terms.append(TrendTerm(trend, self._trend_features))  # inputs (m, 3n)
        if self._curvature is not None:
            curvature = self._curvature.with_variance(
                self.prior_curvature * self.kernel.radial.slope_at_zero(gamma)
            )
            terms.append(CurvatureTerm(curvature, self._curvature_rows))  # inputs (m, 3n+1)
        return terms

    def _dense(self, gamma, select):
        """Joint covariance (N', N') of the ``select``-ed configurations, added terms
        included."""
        K = self._structure.dense(gamma, select)
        for term in self._added_terms(gamma):
            K.add_(term.dense(select))
        return K

    # ---- marginal likelihood --------------------------------------------------------
    def _covariance(self, gamma, select):
        """``K + Lambda / s^2`` (N', N') of the observations of the ``select``-ed
        configurations: of their gradients in the features, or, where the metric says
        what a gradient observes there, of those directions
        (:mod:`asebo.model.observed_directions`)."""
        n = self._structure.positions.shape[1]
        directions = self._directions
        if directions is None:
            K = self._dense(gamma, select)
            K.diagonal().add_(self._noise(len(select), n, gamma))
            return K
        features = self._structure.positions[select].reshape(len(select), 3 * n)  # (m', D)
        values = self._structure.geometry(select, select).profile(gamma)
        K = directions.joint_dense(features, values, select)
        for term in self._added_terms(gamma):
            K.add_(directions.covariance(term.dense(select), select))
        gradient_variance = self.gradient_noise**2 * self.kernel.radial.slope_at_zero(gamma)
        K.diagonal().add_(directions.noise(select, self.energy_noise**2, gradient_variance))
        return K

    def _rows_per_configuration(self, n_atoms):
        """Observations per configuration in the covariance: ``3n + 1``, or ``R + 1``."""
        if self._directions is None:
            return 3 * n_atoms + 1
        return self._directions.rows_per_configuration

    def _count(self, select):
        """Observations of the ``select``-ed configurations the likelihood counts."""
        if self._directions is not None:
            return self._directions.count(select)
        return len(select) * (3 * self._structure.positions.shape[1] + 1)

    def _profile_nll(self, log_gamma, select, y):
        """Negative log marginal likelihood per datum with ``s^2`` profiled out.

        ``select`` indexes the configurations of the structure that ``y`` belongs to.
        """
        gamma = float(np.exp(log_gamma))
        factor = SymmetricFactor(self._covariance(gamma, select).numpy())
        y = y.numpy()
        return profiled_nll(y, factor.solve(y), factor.logdet(), self._count(select))

    def _fit_gamma(self, y, m, n_atoms):
        rows = self._rows_per_configuration(n_atoms)
        window = min(self.hyper_window, m, max(2, self.max_size // 2 // rows))
        select = torch.arange(m - window, m)
        y_recent = y[-window * rows :]
        low, high = np.log(self.gamma_bounds[0]), np.log(self.gamma_bounds[1])
        result = minimize_scalar(
            self._profile_nll,
            bounds=(low, high),
            method="bounded",
            args=(select, y_recent),
            options={"xatol": 0.1},
        )
        # Brent's bounded search never evaluates the bounds themselves
        candidates = {result.x: result.fun}
        for end in (low, high):
            candidates[end] = self._profile_nll(end, select, y_recent)
        return float(np.exp(min(candidates, key=candidates.get)))

    def _fit_curvature(self, prior_energies, prior_gradients, origin):
        """``_curvature``, the prior's curvature part around the observation ``origin``,
        and ``_curvature_rows``, its rows ``phi`` (m, 3n+1) at the observations; both
        None without a calculator prior or with ``prior_curvature`` 0."""
        self._curvature = self._curvature_rows = None
        if self.prior_curvature == 0 or self.prior.constant:
            return
        gradients = torch.as_tensor(prior_gradients).reshape(len(prior_energies), -1)  # (m, 3n)
        self._curvature = PriorCurvature(
            1.0,
            prior_energies[origin],
            gradients[origin].clone(),
            float(gradients.pow(2).mean().sqrt().clamp_min(1e-12)),
        )
        self._curvature_rows = self._curvature.rows(
            self._trend_features, torch.as_tensor(prior_energies), gradients
        )

    def _update_structure(self, P):
        """Reuse the stored kernel structure when ``P`` extends the configurations seen."""
        structure = getattr(self, "_structure", None)
        seen = len(structure) if structure is not None else 0
        if (
            structure is None
            or seen > len(P)
            or structure.positions.shape[1:] != P.shape[1:]
            or not torch.equal(structure.positions, P[:seen])
        ):
            structure, seen = JointStructure(self.kernel), 0
            self._cg_failed_gamma = 0.0
        self._structure = structure.extend(P[seen:])

    def _select(self, energies, n_atoms, centre=None):
        """Indices of the configurations to condition on: all of them, or, when their
        covariance would exceed ``max_size`` rows, those nearest to any of the
        configurations ``centre`` (indices; default the lowest-energy one)."""
        m = len(self._structure)
        count = max(2, self.max_size // self._rows_per_configuration(n_atoms))
        if m <= count:
            return torch.arange(m)
        centre = [int(np.argmin(energies))] if centre is None else list(centre)
        distance = self._structure.distance[centre].min(dim=0).values  # (m,)
        distance[-1] = -1.0  # the latest observation always stays
        return torch.sort(torch.argsort(distance)[:count]).values

    # ---- fit and predict ------------------------------------------------------------
    def fit(self, positions, energies, forces, centre=None):
        """Condition on observed energies and forces.

        Parameters
        ----------
        positions : array (m, n, 3)
        energies : array (m,)
        forces : array (m, n, 3)
            Forces, ``-dE/dx``.
        centre : sequence of int, optional
            Beyond ``max_size`` rows, the configurations nearest to any of these
            observations make ``selected_``; default the lowest-energy one.

        Returns
        -------
        self
        """
        positions, energies, forces = _checked_observations(positions, energies, forces)
        m, n, _ = positions.shape
        prior_e, prior_g = self._prior_at_observations(positions, energies)
        gradients = -forces
        earlier, self._directions = self._directions, None
        if hasattr(self.metric, "observation_bases"):
            bases = self.metric.observation_bases(positions)
            self._directions = ObservedDirections(bases, earlier)
        if self.metric is not None:
            prior_g = self.metric.feature_gradients(positions, prior_g).numpy()
            gradients = self.metric.feature_gradients(positions, gradients).numpy()
            positions = self.metric.features(positions).numpy()
            n = positions.shape[1]  # rows of three features (a periodic metric's are fewer)
        y = self._targets(energies, gradients, prior_e, prior_g)  # (m (3n+1),)
        if self._directions is not None:
            y = self._directions.reduce(y)[:, 0]  # (m (R+1),)
        flat = torch.as_tensor(positions).reshape(m, 3 * n)
        self._trend_origin = flat[int(np.argmin(energies))].clone()  # (3n,)
        self._trend_features = flat - self._trend_origin  # (m, 3n)
        self._fit_curvature(prior_e, prior_g, int(np.argmin(energies)))
        self._update_structure(torch.as_tensor(positions))
        gamma = self._fit_gamma(y, m, n) if self.fit_gamma else float(self.gamma)
        select = self._select(energies, n, centre)
        gamma, factor, jitter = self._factorize_shortening(gamma, select, n)
        self.gamma_ = gamma
        self._y, self._feature_rows = y, n  # for conditioned_near
        self._condition(select, factor, jitter)
        return self

    def _condition(self, select, factor, jitter):
        """The weights and output scale of the observations ``y`` on ``select`` (m',),
        the Cholesky factor (N', N') of ``K + Lambda / s^2`` on them."""
        self.jitter_ = jitter
        self.selected_ = select  # (m',): the configurations the variance conditions on
        self._factor = factor  # (N', N')
        y, n = self._y, self._feature_rows
        self._alpha_observed = self._solve(y, self.gamma_, select, factor, n)  # like y
        self._alpha = self._alpha_observed  # (m (3n+1),): the weights of the features
        if self._directions is not None:
            self._alpha = self._directions.expand(self._alpha_observed)[:, 0]
        count = self._count(torch.arange(len(self._structure)))
        self.outputscale_ = max(float(y @ self._alpha_observed) / count, 1e-12)
        self.hessians_ = {}

    def conditioned_near(self, centre):
        """A copy of this fitted GP that conditions on the configurations nearest to the
        observations ``centre`` (indices) alone, up to ``max_size`` rows, without
        conjugate gradients: a local GP (R. B. Gramacy and D. W. Apley, "Local Gaussian
        process approximation for large computer experiments", J. Comput. Graph. Stat.
        24, 561 (2015)) with this GP's prior, length scale and features. This GP is left
        as it is; the observations' features and gradients are shared, not computed
        again."""
        local = copy.copy(self)
        local.cg_max_iter = 0
        select = self._select(None, self._feature_rows, centre)
        factor, jitter = local._factorize(self.gamma_, select, self._feature_rows)
        local._condition(select, factor, jitter)
        return local

    def _solve(self, y, gamma, select, factor, n_atoms):
        """Weights ``(K + Lambda / s^2)^{-1} y`` of every observation.

        With every configuration in ``select`` this is the dense solve. Beyond
        ``max_size`` rows it is conjugate gradients with the structured product,
        preconditioned by the dense factor on ``select`` and by the configurations'
        own blocks elsewhere (:func:`asebo.kernels.joint.block_jacobi`), started
        from the better (by residual) of the weights of ``select`` alone and the
        previous fit's weights. Where CG does not reach ``cg_tolerance`` within
        ``cg_max_iter`` iterations, as happens at long length scales, where the
        covariance is as ill-conditioned as the noise is small, the weights of
        ``select`` alone are used: the posterior is then exact for those
        configurations, never a half-converged mixture; and later fits at that
        ``gamma`` or below (longer length scales) skip CG.
        """
        block = self._rows_per_configuration(n_atoms)
        m = len(self._structure)
        rows = torch.as_tensor(observation_rows(select.numpy(), block))  # (N',)
        subset = torch.zeros_like(y)
        subset[rows] = _cholesky_solve(factor, y[rows, None])[:, 0]
        # CG converges less well the longer the length scale: once it failed at some
        # gamma, it is not tried again at that gamma or below
        failed = getattr(self, "_cg_failed_gamma", 0.0)
        if len(select) == m or self.cg_max_iter == 0 or gamma <= failed:
            self.solve_info_ = None
            return subset
        operator = self._structure.operator(gamma)
        for term in self._added_terms(gamma):
            operator = term.around(operator)
        noise = self._noise(m, n_atoms, gamma) + self._jitter_absolute
        blocks = block_jacobi(operator.geometry, gamma, noise)
        directions = self._directions
        if directions is not None:  # T K T^T, the blocks' inverses through T
            operator = ProjectedOperator(operator, directions)
            gradient_variance = self.gradient_noise**2 * self.kernel.radial.slope_at_zero(gamma)
            noise = directions.noise(torch.arange(m), self.energy_noise**2, gradient_variance)
            noise = noise + self._jitter_absolute
            blocks = _projected(blocks, directions)
        preconditioner = _subset_preconditioner(blocks, factor, rows)
        alpha, info = solve_joint(
            operator,
            y,
            noise,
            method="cg",
            tolerance=self.cg_tolerance,
            max_iter=self.cg_max_iter,
            preconditioner=preconditioner,
            initial_guess=self._cg_start(operator, noise, y, subset),
        )
        self.solve_info_ = info
        if info.residual <= self.cg_tolerance:
            return alpha
        self._cg_failed_gamma = max(failed, gamma)
        return subset

    def _cg_start(self, operator, noise, y, subset):
        """Where CG starts (N,): of ``subset``, the weights of the selected configurations
        alone, and the previous fit's weights padded with zeros, those with the smaller
        residual."""

        def residual(x):
            return float((operator @ x + noise * x - y).norm() / y.norm().clamp_min(1e-300))

        starts = [subset]
        previous = getattr(self, "_alpha_observed", None)
        if previous is not None and len(previous) < len(y):
            starts.append(torch.cat([previous, torch.zeros(len(y) - len(previous), dtype=y.dtype)]))
        return starts[int(np.argmin([residual(x) for x in starts]))]

    def _factorize_shortening(self, gamma, select, n_atoms):
        """``gamma`` and the Cholesky factor and jitter of :meth:`_factorize` there, or,
        with ``fit_gamma``, at ``gamma`` doubled (up to the upper bound) until the jitter
        is at most the energy noise.

        ``gamma`` comes from the latest configurations; over all of them the improper
        kernel can be indefinite at long length scales, and jitter beyond the noise
        would stop the posterior from interpolating: the length scale is shortened.
        """
        factor, jitter = self._factorize(gamma, select, n_atoms)
        if self.fit_gamma:
            while jitter > self.energy_noise**2 and gamma < self.gamma_bounds[1]:
                gamma = min(2.0 * gamma, self.gamma_bounds[1])
                factor, jitter = self._factorize(gamma, select, n_atoms)
        return gamma, factor, jitter

    def _factorize(self, gamma, select, n_atoms):
        """Cholesky factor of ``K + Lambda / s^2`` on ``select`` and the jitter it needed.

        The jitter is relative to the mean diagonal; ``_jitter_absolute`` keeps it in
        absolute terms for the covariance of every observation.
        """
        K = self._covariance(gamma, select)
        factor = SymmetricFactor(K.numpy())
        self._jitter_absolute = factor.jitter * float(K.diagonal().mean())
        return torch.from_numpy(factor.lower), factor.jitter

    def _prior_mean_and_gradient(self, x):
        """Prior mean (b,) and its gradient (b, n, 3) at configurations x (b, n, 3)."""
        energies, gradients = self.prior.energies_and_gradients(x.numpy())  # (b,), (b, n, 3)
        return torch.as_tensor(energies) + self.prior_offset_, torch.as_tensor(gradients)

    def posterior_with_gradients(self, x, with_variance=True):
        """Posterior mean and variance at x (b, n, 3), with their gradients.

        The mean and its gradient are one structured product of the cross covariance
        with the weights of every observation, ``O(m n)`` per configuration; the
        variance conditions on the configurations of ``selected_`` (all of them
        below ``max_size`` rows), which can only overestimate it, and costs a
        triangular solve with their dense factor. ``with_variance=False`` skips the
        variance (None, and None for its gradient), as a Hessian of the mean by
        differences of its gradient may.

        Returns
        -------
        mean, variance : tensors (b,)
        grad_mean, grad_variance : tensors (b, n, 3)
        """
        b, n, _ = x.shape
        gamma = self.gamma_
        prior, prior_gradient = self._prior_mean_and_gradient(x)
        terms = self._added_terms(gamma)
        pullback = None
        if self.metric is not None:
            x, pullback = self.metric.features_and_pullback(x)
            n = x.shape[1]
        geometry = self._structure.cross(x)  # (b, m) pairs
        values = geometry.profile(gamma)  # (k, a, c), each (b, m)
        u = x.reshape(b, 3 * n) - self._trend_origin  # (b, 3n)
        queries = [term.query(u, prior) for term in terms]  # each (b, k)
        mean_rows = self._mean_rows(geometry, values, terms, queries).reshape(b, 3 * n + 1)
        mean = prior + mean_rows[:, 0]
        gradients = (mean_rows[:, 1:].reshape(b, n, 3),)
        variance = near_weights = None
        if with_variance:
            variance, grad_variance, near_weights = self._variance_with_gradient(
                geometry, values, terms, queries, n
            )
            gradients = (*gradients, grad_variance)
        if pullback is not None:
            gradients = pullback(*gradients)
        grad_mean, grad_variance = gradients[0], gradients[1] if with_variance else None
        grad_mean, grad_variance = self._add_gradients_beyond_features(
            terms, queries, near_weights, prior_gradient, variance, grad_mean, grad_variance
        )
        if with_variance:
            variance = variance.clamp_min(self._variance_floor)
        return mean, variance, prior_gradient + grad_mean, grad_variance

    def _mean_rows(self, geometry, values, terms, queries):
        """The posterior mean less the prior and its gradient in the features,
        (b (3n+1), 1): the cross covariance, added terms included, times the weights."""
        weights = self._alpha[:, None]
        rows = joint_matmul(geometry, self.gamma_, weights, values)
        for term, query in zip(terms, queries):
            rows = rows + term.kernel.matmul(query, term.inputs, weights)
        return rows

    def _add_gradients_beyond_features(
        self, terms, queries, near_weights, prior_gradient, variance, grad_mean, grad_variance
    ):
        """The gradients (b, n, 3) of the mean and variance (None without it) in the
        positions with what the added terms contribute beyond the metric's pullback.

        The prior curvature's ``grad h`` enters the mean's gradient through the
        weights' product and the variance's through ``2 s^2 (c h - c phi_near . w)``
        (:meth:`asebo.kernels.added_terms.CurvatureTerm.gradient_beyond_features`).
        """
        s2, floor = self.outputscale_, self._variance_floor
        weights = self._alpha[:, None]
        for term, query in zip(terms, queries):
            beyond = term.gradient_beyond_features(query, weights, near_weights, self.selected_)
            if beyond is None:
                continue
            mean_weight, residual = beyond  # (1,), (b,) or None
            prior_h = prior_gradient / term.kernel.scale  # (b, n, 3)
            grad_mean = grad_mean + mean_weight * prior_h
            if variance is not None:
                variance_weight = torch.where(variance > floor, 2.0 * s2 * residual, 0.0)  # (b,)
                grad_variance = grad_variance + variance_weight[:, None, None] * prior_h
        return grad_mean, grad_variance

    @property
    def _variance_floor(self):
        """The smallest posterior variance, ``1e-12 s^2``: below it the variance is
        taken as zero, and so is its gradient."""
        return 1e-12 * self.outputscale_

    def _variance_with_gradient(self, geometry, values, terms, queries, n):
        """The posterior variance (b,) on ``selected_``, its gradient (b, n, 3) in the
        ``n`` features, and the weights ``(K + Lambda / s^2)^{-1} c`` (N', b) of the
        configurations, from :meth:`posterior_with_gradients`'s cross geometry."""
        gamma, s2 = self.gamma_, self.outputscale_
        near = geometry.take(cols=self.selected_)
        near_values = tuple(value[:, self.selected_] for value in values)
        c = energy_rows(near, gamma, near_values)  # (b, N')
        b = c.shape[0]
        prior_variance, grad_prior_variance = torch.ones(b, dtype=c.dtype), 0.0
        near_inputs = [term.inputs[self.selected_] for term in terms]  # each (m', k)
        for term, query, near_input in zip(terms, queries, near_inputs):
            c = c + term.kernel.energy_rows(query, near_input)
            term_variance, grad_term_variance = term.kernel.prior_variance(query)
            prior_variance = prior_variance + term_variance
            grad_prior_variance = grad_prior_variance + grad_term_variance
        if self._directions is None:
            w = _cholesky_solve(self._factor, c.T)  # (N', b)
        else:  # c T^T (b, m' (R+1)), its weights, and those of the features T^T w
            c = self._directions.reduce(c.T, self.selected_).T
            w = _cholesky_solve(self._factor, c.T)
        variance = s2 * (prior_variance - (c * w.T).sum(dim=1))
        if self._directions is not None:
            w = self._directions.expand(w, self.selected_)  # (N', b)
        # d(c_i . K^{-1} c_i)/dx_i = 2 (dc_i/dx_i) w_i: the gradient rows of the product
        rows = joint_matmul(near, gamma, w, near_values)  # (b (3n+1), b)
        for term, query, near_input in zip(terms, queries, near_inputs):
            rows = rows + term.kernel.matmul(query, near_input, w)
        rows = rows.reshape(b, 3 * n + 1, b)[torch.arange(b), 1:, torch.arange(b)]  # (b, 3n)
        grad_variance = s2 * (grad_prior_variance - 2.0 * rows).reshape(b, n, 3)
        floor = self._variance_floor
        grad_variance = torch.where((variance > floor)[:, None, None], grad_variance, 0.0)
        return variance, grad_variance, w

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
        return _Posterior.apply(x, self)

    def predict(self, positions, return_std=False, return_gradient=False):
        """Posterior mean energy (and std, and mean gradient) at (b, n, 3) or (n, 3) positions."""
        x = torch.as_tensor(np.asarray(positions, dtype=np.float64))
        single = x.ndim == 2
        x = x[None] if single else x
        mean, variance, grad_mean, _ = self.posterior_with_gradients(x, with_variance=return_std)
        out = [mean.numpy()]
        if return_std:
            out.append(np.sqrt(variance.numpy()))
        if return_gradient:
            out.append(grad_mean.numpy())
        out = [o[0] for o in out] if single else out
        return out[0] if len(out) == 1 else tuple(out)


class _Posterior(torch.autograd.Function):
    """The GP's posterior mean and variance at x (b, n, 3), differentiable in x.

    The backward pass multiplies the gradients that
    :meth:`EnergyForceGP.posterior_with_gradients` computes with the structured
    cross products: no autograd graph through the kernel is built.
    """

    @staticmethod
    def forward(ctx, x, gp):
        mean, variance, grad_mean, grad_variance = gp.posterior_with_gradients(x.detach())
        ctx.save_for_backward(grad_mean, grad_variance)
        return mean, variance

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_mean_out, grad_variance_out):
        grad_mean, grad_variance = ctx.saved_tensors
        return (
            grad_mean_out[:, None, None] * grad_mean
            + grad_variance_out[:, None, None] * grad_variance
        ), None


def _checked_observations(positions, energies, forces):
    """``positions`` (m, n, 3), ``energies`` (m,) and ``forces`` (m, n, 3) as float64
    arrays, refused unless of these shapes and finite."""
    positions = np.asarray(positions, dtype=np.float64)
    energies = np.asarray(energies, dtype=np.float64)
    forces = np.asarray(forces, dtype=np.float64)
    if positions.ndim != 3 or positions.shape[-1] != 3:
        raise ValueError(f"positions must have shape (m, n_atoms, 3), got {positions.shape}")
    m = len(positions)
    if energies.shape != (m,) or forces.shape != positions.shape:
        raise ValueError(
            f"expected energies ({m},) and forces {positions.shape}, got "
            f"{energies.shape} and {forces.shape}"
        )
    for name, values in (("positions", positions), ("energies", energies), ("forces", forces)):
        if not np.isfinite(values).all():
            raise ValueError(f"{name} contain NaN or inf: remove that observation")
    return positions, energies, forces


def _subset_preconditioner(blocks, factor, rows):
    """``r (N, t) -> P^{-1} r`` for CG: the dense factor (N', N') on the ``rows`` (N',) of
    the selected configurations, ``blocks``, each other configuration's own block's
    inverse (:func:`asebo.kernels.joint.block_jacobi`), elsewhere.

    The trend adds ``c I`` to every gradient block: a preconditioner without it still
    takes care of the rigid motions and the diagonal.
    """

    def preconditioner(r):  # (N, t)
        out = blocks(r)
        out[rows] = _cholesky_solve(factor, r[rows])
        return out

    return preconditioner


def _projected(blocks, directions):
    """``r -> T M(T^T r)`` of the configurations' block inverses ``M`` in the features,
    for the observations of ``directions``: symmetric positive definite, the rows
    that observe nothing kept as they are."""
    unobserved = directions.unobserved_rows()[:, None]  # (N, 1)

    def projected(r):  # (N, t)
        out = directions.reduce(blocks(directions.expand(r)))
        return torch.where(unobserved, r, out)

    return projected


def _is_number(value):
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _check_number(name, value, minimum, inclusive=True):
    """Refuse ``value`` unless it is a finite number at least (or above) ``minimum``."""
    finite = _is_number(value) and np.isfinite(value)
    if not (finite and (value >= minimum if inclusive else value > minimum)):
        bound = f"{'>=' if inclusive else '>'} {minimum:g}"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


def _cholesky_solve(factor, rhs):
    """``(L L^T)^{-1} rhs`` by two triangular solves (faster than ``torch.cholesky_solve``)."""
    half = torch.linalg.solve_triangular(factor, rhs, upper=False)
    return torch.linalg.solve_triangular(factor.T, half, upper=True)
