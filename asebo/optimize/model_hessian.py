"""The Hessian of the GP's posterior mean at a configuration, its curvatures and their
uncertainty: the model's picture of the minimum, at no calculator call.

The Hessian is the forward difference of the posterior mean's analytic gradient
(:meth:`asebo.model.gp.EnergyForceGP.predict`) over a step of :data:`FORWARD_STEP` Å,
symmetrised: one gradient per free coordinate, half the central difference's. Its
error is of order ``FORWARD_STEP`` times the third derivative, far below the model's
own uncertainty. Under a prior calculator the gradient carries the calculator's own
noise (an SCF converged to its tolerance), which the difference divides by the step:
the difference is then central, over :data:`NOISY_STEP`. The
curvatures are its eigenvalues in the free coordinates less the rigid motions
(translations and, for a molecule with no atom held, rotations about the centroid).

The uncertainty of a curvature ``k`` along a unit mode ``v``: expand the model's
energy at ``x + d v`` in ``d`` and average the two signs. The rise of its variance
over that at ``x``, ``e(d)``, is ``a d^2 + b d^4 + O(d^6)`` with ``a = Var(g) +
Cov(E, k)`` (the slope's variance and the value's covariance with the curvature) and
``b = Var(k) / 4`` plus covariances of ``E`` and ``g`` with higher derivatives, small
where the energy and forces of ``x`` are observed. Where the observations
carry noise, ``a d^2`` dominates at the distances where ``b d^4`` could be read
alone, and of either sign, so reading ``e(d)`` as ``b d^4`` can give a rise below
zero and a std of zero. Two distances separate the terms: ``Var(k) = (e(2d) - 4
e(d)) / (3 d^4)``, at ``d`` = :data:`CURVATURE_PROBE` Å, where the result hardly
depends on ``d`` (Rasmussen and Williams, *Gaussian Processes for Machine
Learning*, MIT Press (2006), sec. 9.4, on the derivatives of a GP; the runs read both
ways in docs/notes/minima-and-model-hessian.md, "The uncertainty of a curvature, read
at two distances").
"""

import copy
from dataclasses import dataclass, replace

import numpy as np

from asebo.optimize.rigid import RCOND, rigid_modes

STEP = 1e-4  # Å, of the central difference of a model's gradient along one mode
FORWARD_STEP = 1e-6
"""Å, of the forward difference of the posterior gradient in :func:`posterior_hessian`:
short enough that the difference's error, of order the step, is far below the
model's uncertainty, long enough that the gradient's rounding stays below that error
(the errors against the central difference over :data:`STEP` in
docs/notes/large-molecules.md, "Where a step's time went")."""
NOISY_STEP = 5e-3
"""Å, the step under a prior calculator, whose forces carry the noise of its SCF: a
difference over a much shorter step divides that noise into errors of eV/Å² (the
errors of GFN1-xTB's Hessian by step in docs/notes/minima-and-model-hessian.md, "The
Hessian's step under a prior calculator"). The difference's own error at 5e-3 Å,
``NOISY_STEP**2 / 6`` times a third derivative of some tens of eV/Å³, is below 1e-3 eV/Å²."""
PROBE = 0.01  # Å, of the central difference of a prior calculator's gradient
CURVATURE_PROBE = 0.005  # Å, and twice it: where the rise of the posterior's variance
# along a mode gives its curvature's std
BATCH = 64  # configurations per posterior evaluation: bounds the cross products' memory
RESOLVED = 3.0  # a curvature is negative beyond doubt below -RESOLVED times its std
ALONG = 0.7  # cosine: a configuration computed lies along a mode from a point


@dataclass(frozen=True)
class ModelCurvature:
    """The model's Hessian at a configuration and its curvatures in the free coordinates.

    Attributes
    ----------
    hessian : array (3n, 3n) or None
        Of the posterior mean, eV/Å², in Cartesian coordinates (atom-major, as
        :class:`ase.vibrations.VibrationsData` takes it); the prior's part included.
        None where only the lowest curvatures were found
        (:func:`asebo.optimize.lowest_curvatures.lowest_model_curvature`).
    curvatures : array (k,)
        Eigenvalues of the Hessian in the free coordinates less the rigid motions,
        ascending, eV/Å²; where :attr:`hessian` is None, the non-positive ones and the
        lowest positive.
    modes : array (k, 3n)
        The unit eigenvectors, one per row.
    uncertainties : array (k,)
        Posterior standard deviation of each curvature, eV/Å².
    evidence : bool array (k,) or None
        Whether something beyond the GP's interpolation says the energy falls along
        each mode (:func:`evidence_of_descent`), examined along every mode of negative
        curvature (:attr:`downward`) and False along the others; None where not
        examined.
    drop : tuple or None
        Where :attr:`hessian` is None: the gradient (3n,) at the configuration and
        :meth:`quadratic_drop` there, eV.
    products : callable or None
        Where :attr:`hessian` is None: directions (3n, p) in the free coordinates less
        the rigid motions -> the Hessian's products with them (3n, p).
    """

    hessian: np.ndarray | None
    curvatures: np.ndarray
    modes: np.ndarray
    uncertainties: np.ndarray
    evidence: np.ndarray | None = None
    drop: tuple | None = None
    products: object = None

    @property
    def downward(self):
        """Indices of the negative curvatures, beyond the model's doubt or not."""
        return np.flatnonzero(self.curvatures < 0.0)

    @property
    def negative(self):
        """Indices of the curvatures below ``-RESOLVED`` times their std: directions
        that lead down beyond the model's doubt."""
        return np.flatnonzero(self.curvatures < -RESOLVED * self.uncertainties)

    @property
    def evidenced(self):
        """The indices of :attr:`negative` along which :attr:`evidence` says the energy
        falls (all of them where evidence was not examined)."""
        negative = self.negative
        return negative if self.evidence is None else negative[self.evidence[negative]]

    def quadratic_drop(self, gradient):
        """How far below ``x`` the minimum of the model's quadratic lies, eV.

        ``sum_i (v_i . g)^2 / (2 k_i)`` over the modes ``v_i`` of positive curvature
        ``k_i``: half the squared Newton decrement of the model at ``x`` (Boyd and
        Vandenberghe, *Convex Optimization*, Cambridge University Press (2004), sec.
        9.5.1), the classic measure of how far a Newton method is from its minimum.
        Small forces along soft modes can leave a large drop: a floppy molecule's
        long, shallow valley, where forces below ``fmax`` on every atom add up
        along a collective torsion.

        Parameters
        ----------
        gradient : array (n, 3) or (3n,)
            The energy's gradient at ``x`` (minus the forces), eV/Å; where
            :attr:`hessian` is None, the one :attr:`drop` was found at.
        """
        if self.hessian is None:
            at, drop = self.drop
            if not np.allclose(np.ravel(gradient), at, rtol=0.0, atol=1e-12):
                raise ValueError(
                    "the quadratic's drop of the lowest curvatures is known at one gradient"
                )
            return drop
        along = self.modes @ np.asarray(gradient, dtype=np.float64).reshape(-1)  # (k,)
        up = self.curvatures > 0
        return float(np.sum(along[up] ** 2 / (2.0 * self.curvatures[up])))

    def projected(self, basis):
        """``basis^T H basis`` (c, c) for orthonormal directions ``basis`` (3n, c) in the
        free coordinates less the rigid motions."""
        if self.hessian is None:
            projected = basis.T @ self.products(basis)
            return 0.5 * (projected + projected.T)
        return basis.T @ self.hessian @ basis

    def summary(self):
        """One line: the lowest curvature, its std, and what the model makes of it.

        The model's curvature along a mode the run never moved along is its prior's:
        a saddle there (a methyl rotor left eclipsed, say) reads as positive. A
        negative curvature beyond doubt that no :attr:`evidence` supports is called
        the interpolation's: between observations the GP's mean can curve down by
        itself (such modes of the S22 complexes and the large molecules, each curving
        up in the target's Hessian: docs/notes/minima-and-model-hessian.md, "Negative
        curvatures of the interpolation alone").
        """
        if not len(self.curvatures):
            return "no free coordinate beyond the rigid motions"
        lowest, doubt = self.curvatures[0], self.uncertainties[0]
        if len(self.evidenced):
            verdict = "a saddle point by the model"
        elif len(self.negative):
            verdict = (
                "the GP's interpolation curves down, but no configuration computed lies "
                "lower or curves down along it: not a saddle point the calls show"
            )
        elif lowest > RESOLVED * doubt:
            verdict = "no negative curvature in the model (unexplored modes keep the prior's)"
        else:
            verdict = "the model cannot tell the sign of the lowest curvature"
        return f"lowest model curvature {lowest:.3g} ± {doubt:.2g} eV/Å²: {verdict}"


def model_curvature(gp, positions, free, rotations=True, every_uncertainty=True):
    """The :class:`ModelCurvature` of a fitted GP at ``positions``.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted; its prior, metric and added terms are those of the last fit.
    positions : array (n, 3)
        Best where energy and forces are observed there (the uncertainty assumes it).
    free : bool array (n, 3)
        Coordinates no constraint holds; the others enter neither the curvatures nor
        the Hessian's rows (left zero).
    rotations : bool
        Whether rotations about the centroid are rigid motions too (a molecule with
        no atom held; not a periodic cell).
    every_uncertainty : bool
        False: the uncertainties of the lowest curvature and of those not above zero
        only, NaN elsewhere; what :attr:`ModelCurvature.negative` and
        :meth:`ModelCurvature.summary` read, at a fraction of the probes.

    Returns
    -------
    ModelCurvature
    """
    positions = np.asarray(positions, dtype=np.float64)
    hessian = posterior_hessian(gp, positions, free)  # (3n, 3n)
    basis = internal_basis(positions, free, rotations)  # (3n, k)
    curvatures, vectors = np.linalg.eigh(basis.T @ hessian @ basis)  # (k,), (k, k)
    modes = (basis @ vectors).T  # (k, 3n)
    probed = np.arange(len(curvatures))
    if not every_uncertainty:
        probed = probed[(curvatures <= 0) | (probed == 0)]
    uncertainties = np.full(len(curvatures), np.nan)
    uncertainties[probed] = curvature_uncertainties(gp, positions, modes[probed])
    return ModelCurvature(hessian, curvatures, modes, uncertainties)


def curvature_uncertainties(gp, positions, modes):
    """Posterior standard deviations (p,) of the curvatures along unit ``modes`` (p, 3n)
    at ``positions`` (n, 3), where energy and forces are observed:
    ``sqrt((e(2d) - 4 e(d)) / (3 d^4))`` at ``d`` = :data:`CURVATURE_PROBE`, with
    ``e(d)`` the rise of the posterior variance ``d`` along each mode over that at
    ``positions``, the two signs averaged (module docstring)."""
    positions = np.asarray(positions, dtype=np.float64)
    modes = np.asarray(modes).reshape(-1, *positions.shape)  # (p, n, 3)
    offsets = CURVATURE_PROBE * np.concatenate([modes, -modes, 2 * modes, -2 * modes])
    probes = np.concatenate([positions[None], positions + offsets])  # (1 + 4p, n, 3)
    variances = np.concatenate([gp.predict(c, return_std=True)[1] for c in in_batches(probes)]) ** 2
    rises = variances[1:].reshape(4, -1) - variances[0]  # (4, p): +d, -d, +2d, -2d
    near, far = 0.5 * (rises[0] + rises[1]), 0.5 * (rises[2] + rises[3])  # (p,) each
    return np.sqrt(((far - 4.0 * near) / (3.0 * CURVATURE_PROBE**4)).clip(0.0))


def descent_along(gp, positions, mode, radius, points=41):
    """The configuration of lowest model energy along ``±mode`` from ``positions``: the
    step of a negative curvature.

    The posterior mean on ``points`` displacements ``t mode``, the largest atomic
    displacement up to ``radius``, both signs tried: at a saddle of the model the two
    signs are alike, and the call there decides. The step is not asked to drop the
    model's energy beyond its doubt, as a proposal of the search is: along a mode
    that breaks a symmetry every configuration kept, the model knows the curvature
    from the prior calculator alone, and its doubt about the drop grows with the
    step; the evidence asked for (:func:`evidence_of_descent`) keeps it from the
    GP's interpolation alone.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
    positions : array (n, 3)
    mode : array (3n,)
        Unit direction.
    radius : float
        Å: the largest atomic displacement.

    Returns
    -------
    array (n, 3) or None
        None where the prior calculator has a value at none of the displacements (each
        one where it fails is left out).
    """
    positions = np.asarray(positions, dtype=np.float64)
    direction = np.asarray(mode, dtype=np.float64).reshape(positions.shape)  # (n, 3)
    scale = radius / np.linalg.norm(direction, axis=1).max()
    steps = np.linspace(-scale, scale, points)
    steps = steps[steps != 0.0]  # (points - 1,)
    candidates = positions[None] + steps[:, None, None] * direction[None]  # (t, n, 3)
    means = np.concatenate([_means_where_defined(gp, chunk) for chunk in in_batches(candidates)])
    if not np.isfinite(means).any():
        return None
    return candidates[int(np.argmin(means))]


def _means_where_defined(gp, configurations):
    """The GP's mean at ``configurations`` (b, n, 3), inf at each one where the prior
    calculator fails (an SCF that does not converge there)."""
    from asebo.model.priors import PriorCalculationError  # it brings PyTorch

    try:
        return np.ravel(gp.predict(configurations))
    except PriorCalculationError:  # one at a time: the others keep their values
        means = []
        for configuration in configurations:
            try:
                means.append(float(np.ravel(gp.predict(configuration[None]))[0]))
            except PriorCalculationError:
                means.append(np.inf)
        return np.array(means)


def evidence_of_descent(prior, observations, positions, mode):
    """Whether the prior or the observations, not the GP's interpolation alone, say the
    energy falls along ``mode`` from ``positions``.

    The GP's curvature between few observations can turn negative by itself, where its
    mean reverts towards the prior between them; a step along such a mode costs a call
    and finds nothing. Evidence is a prior calculator's own curvature along the mode
    being negative (a cheaper method that knows the saddle), or a configuration
    computed displaced from ``positions`` mostly along the mode (cosine above
    :data:`ALONG`) that is lower, or whose gradient differs from the one at
    ``positions`` by a negative curvature, ``(g(x) - g(c)) . (x - c) < 0``: the
    secant of quasi-Newton methods (Nocedal and Wright, *Numerical Optimization*,
    Springer (2006), sec. 6.1), measured rather than modelled. A model prior (the
    Lindh model, the springs) is no evidence: it is harmonic about another
    configuration, and its curvature away from there is geometry, not chemistry.

    Parameters
    ----------
    prior : asebo.model.priors.Prior or None
        The GP's prior calculator for the current observations; None under a model
        prior.
    observations : tuple of arrays
        Positions (m, n, 3), energies (m,) and forces (m, n, 3) computed; among them
        ``positions``.
    positions : array (n, 3)
    mode : array (3n,)
        Unit direction.
    """
    positions = np.asarray(positions, dtype=np.float64)
    direction = np.asarray(mode, dtype=np.float64).reshape(positions.shape)  # (n, 3)
    if prior is not None and prior_curvature(prior, positions, mode, PROBE) < 0.0:
        return True
    computed, energies, forces = (np.asarray(array, dtype=np.float64) for array in observations)
    m = len(computed)
    here = np.argmin(np.abs(computed - positions).reshape(m, -1).max(axis=1))
    steps = (positions - computed).reshape(m, -1)  # (m, 3n): from each configuration
    lengths = np.linalg.norm(steps, axis=1)  # (m,)
    along = np.abs(steps @ direction.ravel()) > ALONG * lengths  # (m,), here excluded
    secants = np.sum((forces - forces[here]).reshape(m, -1) * steps, axis=1)  # (m,) y . s
    return bool(np.any(along & ((energies < energies[here]) | (secants < 0.0))))


def prior_where_interpolated(curvature, prior, positions):
    """``curvature`` with the prior's own curvature along each mode where the model
    curves down and no :attr:`ModelCurvature.evidence` says so, where the prior's is
    positive there.

    Such a negative curvature is the GP's interpolation alone: where it was read against
    the target's Hessian it curved up there, and the prior (the Lindh model as the GP
    held it) came closer to the target than the model. The same holds within the model's
    doubt, so every unsupported negative curvature is replaced, not only those beyond
    doubt (the endpoints compared in docs/notes/minima-and-model-hessian.md, "Negative
    curvatures of the interpolation alone" and "The result's Hessian"). The modes and
    the other curvatures are kept: the Hessian changes by ``(k_prior - k) v v^T`` along
    each such unit mode ``v``, and the curvatures are sorted again, their modes,
    uncertainties and evidence with them.

    Parameters
    ----------
    curvature : ModelCurvature
        With its ``evidence`` examined (none replaced where it was not).
    prior : asebo.model.priors.Prior
        The GP's prior; its gradient is differenced over :data:`STEP` Å along each mode
        (:data:`NOISY_STEP` for a calculator, two of its calls per mode).
    positions : array (n, 3)
        Where ``curvature`` was taken.

    Returns
    -------
    ModelCurvature
    """
    positions = np.asarray(positions, dtype=np.float64)
    if curvature.evidence is None:
        return curvature
    hessian = curvature.hessian.copy()
    curvatures = curvature.curvatures.copy()
    step = NOISY_STEP if prior.is_calculator else STEP
    for index in curvature.downward[~curvature.evidence[curvature.downward]]:
        mode = curvature.modes[index]  # (3n,)
        along = prior_curvature(prior, positions, mode, step)
        if along > 0.0:
            hessian += (along - curvatures[index]) * np.outer(mode, mode)
            curvatures[index] = along
    order = np.argsort(curvatures, kind="stable")
    return ModelCurvature(
        hessian,
        curvatures[order],
        curvature.modes[order],
        curvature.uncertainties[order],
        curvature.evidence[order],
    )


def interpolation_excess(prior, observations, positions, mode, model):
    """How much the prior curves up more than the model along the unit ``mode`` (3n,)
    at ``positions`` (n, 3), eV/Å², where only the GP's interpolation curves down
    there; None elsewhere.

    Only the interpolation: the model's curvature ``model`` is negative, the prior's
    (over :data:`PROBE`) positive, and no configuration computed says the energy falls
    along the mode (:func:`evidence_of_descent` without the prior). The refusal of a
    search's step (:func:`asebo.optimize.trust.check_curvature_supported`) and the
    modes a repeated search corrects (:func:`interpolated_descents`) read it alike.

    Parameters
    ----------
    prior : asebo.model.priors.Prior
    observations : tuple of arrays
        Positions (m, n, 3), energies (m,) and forces (m, n, 3) computed, ``positions``
        among them.
    positions : array (n, 3)
    mode : array (3n,)
    model : float
        The model's curvature along ``mode``, eV/Å².
    """
    if model >= 0.0:
        return None
    along = prior_curvature(prior, positions, mode, PROBE)
    if along <= 0.0 or evidence_of_descent(None, observations, positions, mode):
        return None
    return along - model


def interpolated_descents(gp, positions, free, observations):
    """The modes of the model's Hessian at ``positions`` along which only the GP's
    interpolation curves down (:func:`interpolation_excess`), and how much the prior
    curves up more than the model along each: what :func:`prior_where_interpolated`
    replaces at convergence, read for a search.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
    positions : array (n, 3)
    free : bool array (n, 3)
    observations : tuple of arrays
        Positions (m, n, 3), energies (m,) and forces (m, n, 3) computed, ``positions``
        among them.

    Returns
    -------
    modes : list of arrays (3n,)
        Unit modes, in the free coordinates less the translations (and the rotations
        where every coordinate is free).
    excesses : list of float
        The prior's curvature less the model's along each, eV/Å² (positive).
    """
    positions = np.asarray(positions, dtype=np.float64)
    hessian = posterior_hessian(gp, positions, free)  # (3n, 3n)
    basis = internal_basis(positions, free, bool(np.all(free)))  # (3n, k)
    curvatures, vectors = np.linalg.eigh(basis.T @ hessian @ basis)  # (k,), (k, k)
    modes = (basis @ vectors).T  # (k, 3n)
    found, excesses = [], []
    for mode, curvature in zip(modes, curvatures):
        excess = interpolation_excess(gp.prior, observations, positions, mode, curvature)
        if excess is not None:
            found.append(mode)
            excesses.append(excess)
    return found, excesses


def prior_curvature(prior, positions, mode, step):
    """The prior's own curvature (eV/Å²) along the unit ``mode`` (3n,) at ``positions``
    (n, 3): the central difference of its gradient over ``step`` Å (two prior calls)."""
    return _curvature_along(
        lambda ends: np.asarray(prior.energies_and_gradients(ends)[1]), positions, mode, step
    )


def directional_curvature(gp, positions, mode):
    """The GP's curvature (eV/Å²) along the unit ``mode`` (3n,) at ``positions`` (n, 3):
    the central difference of its posterior gradient over :data:`STEP`, or
    :data:`NOISY_STEP` under a prior calculator, as in :func:`posterior_hessian`."""
    step = NOISY_STEP if gp.prior.is_calculator else STEP
    return _curvature_along(
        lambda ends: gp.predict(ends, return_gradient=True)[1], positions, mode, step
    )


def _curvature_along(gradients_at, positions, mode, step):
    """The central difference over ``step`` Å of ``gradients_at`` ((2, n, 3) -> (2, n, 3))
    along the unit ``mode`` (3n,) at ``positions`` (n, 3), eV/Å²."""
    direction = np.asarray(mode, dtype=np.float64).reshape(positions.shape)  # (n, 3)
    ends = positions[None] + step * np.array([1.0, -1.0])[:, None, None] * direction
    gradients = gradients_at(ends)  # (2, n, 3)
    return float(np.sum((gradients[0] - gradients[1]) * direction)) / (2 * step)


def posterior_hessian(gp, positions, free):
    """Hessian (3n, 3n) of the posterior mean at ``positions`` (n, 3), eV/Å².

    Forward differences of the analytic posterior gradient along each free coordinate
    of ``free`` (n, 3) over :data:`FORWARD_STEP`, or central ones over
    :data:`NOISY_STEP` under a prior calculator, symmetrised; the rows and columns of
    held coordinates are zero. Computed once per fit of ``gp`` at a configuration: the
    check at convergence and a refused search of the same step read the same one.
    """
    positions = np.asarray(positions, dtype=np.float64)
    key = (positions.tobytes(), np.asarray(free, dtype=bool).tobytes())
    if key not in gp.hessians_:
        gp.hessians_[key] = _differenced_hessian(gp, positions, free)
    return gp.hessians_[key].copy()


def _differenced_hessian(gp, positions, free):
    """:func:`posterior_hessian`, computed."""
    n = len(positions)
    columns = np.flatnonzero(np.asarray(free).ravel())  # (f,)
    f = len(columns)
    central = gp.prior.is_calculator
    step = NOISY_STEP if central else FORWARD_STEP
    shifts = np.zeros((f, 3 * n))  # (f, 3n)
    shifts[np.arange(f), columns] = step
    back = -shifts if central else np.zeros((1, 3 * n))  # (f or 1, 3n): the other ends
    configurations = positions[None] + np.concatenate([shifts, back]).reshape(-1, n, 3)
    gradients = np.concatenate(
        [gp.predict(chunk, return_gradient=True)[1] for chunk in in_batches(configurations)]
    ).reshape(-1, 3 * n)  # (2f or f + 1, 3n)
    hessian = np.zeros((3 * n, 3 * n))
    hessian[columns] = (gradients[:f] - gradients[f:]) / ((2 if central else 1) * step)
    hessian[:, ~np.asarray(free).ravel()] = 0.0
    return 0.5 * (hessian + hessian.T)


def internal_basis(positions, free, rotations=True):
    """Orthonormal basis (3n, k) of the free coordinates less the rigid motions that
    leave every held coordinate in place.

    The rigid motions are the translations, and with ``rotations`` the rotations
    about the centroid. With every coordinate free all of them are removed; a molecule
    held by one atom still turns about it, and by two about their axis, so those
    rotations are removed too; three atoms held off one line, or any atom held in a
    periodic cell (``rotations`` False), leave no rigid motion.
    """
    return _free_complement(_rigid(positions, rotations), free)


def mass_weighted_internal_basis(positions, masses, rotations=True, free=None):
    """Orthonormal basis (3n, k) of the mass-weighted coordinates ``sqrt(m) x`` less the
    rigid motions: the vibrations of E. B. Wilson, J. C. Decius, P. C. Cross,
    *Molecular Vibrations*, McGraw-Hill (1955), ch. 2.

    The rigid motions in these coordinates are the Cartesian ones of
    :func:`asebo.optimize.rigid.rigid_modes` times ``sqrt(m)``; ``rotations`` False
    keeps the rotations (a periodic cell). With ``free`` (bool (n, 3)), the basis spans
    the free coordinates only, less the rigid motions that leave the held ones in place
    (:func:`internal_basis`).
    """
    weights = np.repeat(np.sqrt(np.asarray(masses, dtype=np.float64)), 3)  # (3n,)
    rigid = _rigid(positions, rotations) * weights[:, None]  # (3n, r)
    return _free_complement(rigid, np.ones(len(rigid), dtype=bool) if free is None else free)


def _rigid(positions, rotations):
    """Displacements (3n, 6) of the rigid motions (3n, 5) for a linear molecule, (3n, 3)
    of the translations alone."""
    modes = rigid_modes(positions)
    return modes if rotations else modes[:, :3]


def _free_complement(rigid, free):
    """Orthonormal basis (3n, k), zero on the held coordinates, of the free coordinates
    (``free`` bool, 3n entries) less the combinations of the motions ``rigid`` (3n, r)
    that move no held coordinate."""
    free = np.asarray(free, dtype=bool).ravel()  # (3n,)
    if free.all():
        return _complement(rigid)
    _, values, rows = np.linalg.svd(rigid[~free])  # rows (r, r)
    rank = int((values > RCOND * max(values.max(initial=0.0), 1.0)).sum())
    moving = rigid @ rows[rank:].T  # (3n, r - rank): zero on the held coordinates
    inside = np.eye(len(free))[:, free]  # (3n, f)
    if moving.shape[1] == 0:
        return inside
    return inside @ _complement(moving[free])


def _complement(rigid):
    """Orthonormal basis (3n, k) of the complement of the span of ``rigid`` (3n, r);
    a direction of relative size below ``RCOND`` (the rotations of one atom) is none.
    A linear molecule's rigid motions are five
    (:func:`asebo.optimize.rigid.rotation_axes`)."""
    left, values, _ = np.linalg.svd(rigid, full_matrices=False)
    span = left[:, values > RCOND * values.max()]  # (3n, r')
    complement = np.linalg.svd(np.eye(len(rigid)) - span @ span.T)[0]  # (3n, 3n)
    return complement[:, : len(rigid) - span.shape[1]]


def without_rigid_motions(hessian, positions, masses, rotations=True):
    """``hessian`` (3n, 3n) with the rigid motions projected out in mass-weighted
    coordinates: their frequencies become exactly zero, the others unchanged where
    the energy is invariant."""
    weights = np.repeat(np.sqrt(np.asarray(masses, dtype=np.float64)), 3)  # (3n,)
    basis = mass_weighted_internal_basis(positions, masses, rotations)  # (3n, k)
    projector = basis @ basis.T  # (3n, 3n)
    weighted = projector @ (hessian / np.outer(weights, weights)) @ projector
    return weighted * np.outer(weights, weights)


def in_batches(configurations):
    """``configurations`` (b, n, 3) in slices of at most :data:`BATCH`."""
    return [configurations[i : i + BATCH] for i in range(0, len(configurations), BATCH)]


def curvature_with_evidence(
    gp,
    observations,
    positions,
    free,
    rotations,
    prior_calculator,
    every_uncertainty=True,
    anchored=False,
    measure=None,
):
    """The GP and its :func:`model_curvature` at ``positions``, with the evidence along
    each downward mode (:func:`evidence_of_descent`).

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to every one of ``observations``.
    observations : asebo.optimize.observations.Observations
    positions : array (N, 3)
    free : array (N, 3) of bool
    rotations : bool
        Whether rotations are rigid motions too.
    prior_calculator : bool
        Whether the GP's prior is a calculator, whose own curvature is evidence.
    every_uncertainty : bool
        False probes the uncertainty of the lowest and non-positive curvatures only.
    anchored : bool
        Under a prior that curves, of :func:`anchored_refit` of ``gp``.
    measure : callable, optional
        ``gp -> ModelCurvature`` in place of :func:`model_curvature` (the lowest
        curvatures alone: :func:`asebo.optimize.lowest_curvatures.lowest_model_curvature`).

    Returns
    -------
    gp : asebo.model.gp.EnergyForceGP
        ``gp``, or its anchored refit.
    curvature : ModelCurvature
    """
    if anchored and not gp.prior.constant:
        gp = anchored_refit(gp, observations, positions)
    if measure is None:
        curvature = model_curvature(gp, positions, free, rotations, every_uncertainty)
    else:
        curvature = measure(gp)
    computed = observations.arrays()
    calculator = gp.prior if prior_calculator else None
    evidence = np.zeros(len(curvature.curvatures), dtype=bool)
    for index in curvature.downward:
        mode = curvature.modes[index]
        evidence[index] = evidence_of_descent(calculator, computed, positions, mode)
    return gp, replace(curvature, evidence=evidence)


def anchored_refit(gp, observations, positions):
    """A copy of ``gp`` (its length scale kept) refitted with its constant the residual
    of the observation at ``positions`` (the lowest-energy one where none is there;
    :class:`asebo.model.priors.AnchoredOffset`) and the prior of the Hessian given as
    a result (:meth:`asebo.model.priors.Prior.for_hessian`); ``gp`` is left as it is."""
    from asebo.model.priors import AnchoredOffset  # it brings PyTorch

    found = observations.find(positions)
    refit = copy.copy(gp)
    refit.prior = AnchoredOffset(
        gp.prior.for_hessian(), observations.best() if found is None else found
    )
    refit.fit_gamma, refit.gamma = False, gp.gamma_
    return refit.fit(*observations.arrays())


@dataclass(frozen=True)
class ModelHessian:
    """The model's Hessian at a configuration computed, as a result.

    Attributes
    ----------
    curvature : ModelCurvature
        The GP's Hessian, its curvatures and modes in the free coordinates less the
        rigid motions, their uncertainties and evidence.
    hessian : array (3N, 3N)
        eV/Å²: ``curvature.hessian`` with the prior's curvature along each mode where
        only the GP's interpolation curves down (:func:`prior_where_interpolated`); rows
        and columns of held coordinates zero.
    atoms : ase.Atoms
        At the configuration.
    free : array (N, 3) of bool
        The coordinates no constraint holds.
    rotations : bool
        Whether rotations are rigid motions too (a molecule with no atom held).
    """

    curvature: ModelCurvature
    hessian: np.ndarray
    atoms: object
    free: np.ndarray
    rotations: bool

    @classmethod
    def of(cls, curvature, prior, atoms, free, rotations):
        """The result of ``curvature`` at ``atoms``' positions under the Hessian's
        ``prior`` (:meth:`asebo.model.priors.Prior.for_hessian`)."""
        hessian = prior_where_interpolated(curvature, prior, atoms.positions).hessian
        return cls(curvature, hessian, atoms, free, rotations)

    def vibrations(self):
        """Harmonic vibrations of :attr:`hessian`.

        The atoms with a free coordinate vibrate; where rotations are rigid motions
        they and the translations are projected out (exactly zero frequencies).

        Returns
        -------
        ase.vibrations.VibrationsData
            Frequencies, zero-point energy, modes, as from ``ase.vibrations``.
        """
        from ase.vibrations import VibrationsData  # it brings Matplotlib: only when asked

        atoms = self.atoms
        indices = np.flatnonzero(self.free.any(axis=1))
        hessian = self.hessian
        if self.rotations:
            hessian = without_rigid_motions(hessian, atoms.positions, atoms.get_masses())
        rows = (3 * indices[:, None] + np.arange(3)).ravel()  # (3f,)
        return VibrationsData.from_2d(atoms, hessian[np.ix_(rows, rows)], indices=indices)
