r"""The lower confidence bound on the GP's energy, minimised in a trust box through BoTorch.

``LCB(x) = mu(x) - kappa sigma(x)`` (Wong and Kolter, eq. 35) is BoTorch's
``UpperConfidenceBound(model, beta=kappa**2, maximize=False)``, which returns
``-LCB``; BoTorch's ``gen_candidates_scipy`` maximises it with L-BFGS-B inside box
bounds: a trust box around the best configuration, on the free coordinates only
(:func:`minimize_lcb`). A negative ``kappa`` makes the bound pessimistic, ``mu +
|kappa| sigma`` (:class:`PessimisticBound`): the search then prefers the steps the
model is sure of to those it merely hopes for.
:func:`search` is the search of one step, repeated in smaller boxes where it fails.
"""

import warnings

import numpy as np
import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.generation import gen_candidates_scipy
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.utils.transforms import t_batch_mode_transform
from gpytorch.distributions import MultivariateNormal

from asebo.model.priors import PriorCalculationError
from asebo.optimize.model_hessian import directional_curvature, interpolated_descents
from asebo.optimize.preconditioning import BoxCoordinates, metric_preconditioner
from asebo.optimize.proposal import SEARCH, SEARCH_FAILED, Proposal
from asebo.optimize.trust import (
    OverturnedCurvatureError,
    SlopeNoiseError,
    UncertainStepError,
    check_confident,
    check_curvature_supported,
)


class EnergyModel(Model):
    """BoTorch view of an :class:`asebo.model.gp.EnergyForceGP`: the energy posterior.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        A fitted GP.
    template : tensor (n, 3)
        Positions that supply the fixed coordinates.
    free : bool tensor (3n,)
        Which flattened coordinates the optimizer moves; ``X`` holds only these.
    offset : float
        eV subtracted from the mean: the search measures the bound from the model's
        energy at the centre of its box.
    box : asebo.optimize.preconditioning.BoxCoordinates, optional
        ``X`` holds the box's coordinates ``y`` instead of the free coordinates.
    corrections : tuple of arrays, optional
        Unit directions ``d_j`` (k, 3n) and curvatures ``a_j`` (k,), eV/Å²: the mean
        gains ``sum_j a_j ((x - template) . d_j)^2 / 2``, the prior's curvature along
        each direction where the GP's interpolation alone curved down
        (:func:`search`).
    subspace : asebo.optimize.subspace.FreeSubspace, optional
        The displacements from ``template`` the constraints allow: the positions of
        ``X`` are projected onto them.
    """

    _num_outputs = 1

    def __init__(self, gp, template, free, offset=0.0, box=None, corrections=None, subspace=None):
        super().__init__()
        self.gp = gp
        self.template = template.reshape(-1)
        self.free = free
        self.offset = offset
        self.box = box
        self.subspace = subspace
        self.corrections = None
        if corrections is not None:
            self.corrections = tuple(
                torch.as_tensor(np.asarray(part), dtype=torch.float64) for part in corrections
            )

    @property
    def num_outputs(self):
        return 1

    @property
    def batch_shape(self):
        return torch.Size([])

    def positions(self, X):
        """Full positions (..., n, 3) from free coordinates X (..., d), or from the
        box's coordinates where the model has a box; projected onto the subspace where
        the model has one."""
        full = self.template.expand(*X.shape[:-1], -1).clone()
        full[..., self.free] = X if self.box is None else self.box.to_box(X)
        if self.subspace is not None:
            full = self.template + self.subspace.project_flat(full - self.template)
        return full.reshape(*X.shape[:-1], -1, 3)

    def posterior(
        self, X, output_indices=None, observation_noise=False, posterior_transform=None, **kwargs
    ):
        """Energy posterior at X (b, q, d): a GPyTorchPosterior with mean (b, q, 1)."""
        b, q, _ = X.shape
        positions = self.positions(X).reshape(b * q, -1, 3)
        mean, variance = self.gp.posterior(positions)
        if self.corrections is not None:
            displacements = positions.reshape(b * q, -1) - self.template  # (bq, 3n)
            mean = mean + added_energy(displacements, *self.corrections)
        mean = mean.reshape(b, q) - self.offset
        covariance = torch.diag_embed(variance.reshape(b, q))  # (b, q, q)
        posterior = GPyTorchPosterior(MultivariateNormal(mean, covariance))
        return posterior if posterior_transform is None else posterior_transform(posterior)


class PessimisticBound(AnalyticAcquisitionFunction):
    """``-(mu + weight sigma)`` of a one-output model at ``X`` (b, 1, d) -> (b,): minus
    an upper confidence bound on the energy, for BoTorch to maximise.

    Minimising the model's energy over hundreds of coordinates favours the directions
    where the GP's correction to its prior happens to be most negative (the optimizer's
    curse: J. E. Smith and R. L. Winkler, Management Science 52, 311 (2006)); weighing
    the uncertainty against a step, rather than for it, leans the search toward the
    steps the observations support, as the restricted-variance steps of Raggi et al.,
    J. Chem. Theory Comput. 16, 3989 (2020) do with a bound on the variance.

    Parameters
    ----------
    model : botorch.models.model.Model
    weight : float
        ``|kappa|`` > 0: standard deviations added to the mean.
    """

    def __init__(self, model, weight):
        super().__init__(model=model)
        self.weight = float(weight)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X):
        mean, sigma = self._mean_and_sigma(X)  # (b, 1) each
        return -(mean + self.weight * sigma).squeeze(-1)


def bound_to_maximise(model, kappa):
    """The acquisition whose maximum is the minimum of ``mu - kappa sigma``: BoTorch's
    ``UpperConfidenceBound`` for ``kappa >= 0``, :class:`PessimisticBound` below."""
    if kappa >= 0:
        return UpperConfidenceBound(model, beta=kappa**2, maximize=False)
    return PessimisticBound(model, -kappa)


def added_energy(displacements, directions, curvatures):
    """``sum_j a_j (s . d_j)^2 / 2`` (b,) for displacements ``s`` (b, 3n) from the centre,
    unit ``directions`` ``d_j`` (k, 3n) and ``curvatures`` ``a_j`` (k,), eV/Å²: what the
    corrections of :class:`EnergyModel` add to its mean (NumPy arrays or tensors)."""
    along = displacements @ directions.T  # (b, k)
    return 0.5 * (along**2) @ curvatures


def minimize_lcb(
    gp,
    starts,
    centre,
    radius,
    free,
    kappa,
    maxiter=200,
    tolerance=1e-5,
    preconditioner=None,
    corrections=None,
    subspace=None,
):
    """Minimise ``mu - kappa sigma`` in the box ``centre +- radius`` on the free coordinates.

    L-BFGS-B stops when an iteration changes the bound by less than ``tolerance``
    times ``max(|bound|, 1 eV)``. Measured from the model's energy at ``centre``,
    the bound of a step is a drop below 1 eV, and the stop is a change below
    ``tolerance`` eV, whatever the reference of the energy (a total energy of
    thousands of eV, a DFT energy relative to atoms). With a ``preconditioner`` the
    search runs unconstrained in the box's coordinates
    (:class:`asebo.optimize.preconditioning.BoxCoordinates`), else in the free
    coordinates within L-BFGS-B's bounds.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
    starts : tensor (s, n, 3)
        Starting configurations (clipped into the box).
    centre : tensor (n, 3)
        Centre of the trust box, also the source of the fixed coordinates.
    radius : float
        Half-width of the box in Å, per coordinate.
    free : bool tensor (3n,)
    kappa : float
        Weight of the uncertainty: > 0 explores, 0 minimises the posterior mean, < 0
        penalises uncertain steps (:class:`PessimisticBound`).
    maxiter : int
        L-BFGS-B iterations.
    tolerance : float
        eV: the search stops when an iteration lowers the bound by less than this.
    preconditioner : tuple of arrays (d, d), optional
        ``P`` and ``P^{-1}`` (:func:`asebo.optimize.preconditioning.preconditioner`) on
        the ``d`` free coordinates.
    corrections : tuple of arrays (k, 3n) and (k,), optional
        Curvatures added to the mean along unit directions (:class:`EnergyModel`).
    subspace : asebo.optimize.subspace.FreeSubspace, optional
        The displacements from ``centre`` the constraints allow (:class:`EnergyModel`):
        the search moves within them.

    Returns
    -------
    positions : tensor (n, 3)
    lcb : float
        ``mu - kappa sigma`` there.
    """
    offset = float(gp.predict(centre.numpy()[None])[0])
    middle = centre.reshape(-1)[free]  # (d,)
    lower, upper = middle - radius, middle + radius
    initial = starts.reshape(len(starts), -1)[:, free]
    initial = torch.minimum(torch.maximum(initial, lower), upper)  # (s, d)
    box = None
    if preconditioner is not None:
        box = BoxCoordinates(middle, radius, *preconditioner)
        initial, lower, upper = box.from_box(initial), None, None
    model = EnergyModel(gp, centre, free, offset, box, corrections, subspace)
    acquisition = bound_to_maximise(model, kappa)
    initial = initial[:, None, :]  # (s, 1, d)
    # gen_candidates_scipy itself, not optimize_acqf: optimize_acqf hands it an empty
    # map of fixed features, and BoTorch then rebuilds every input column by column at
    # each evaluation, a Python loop over the 3N coordinates and its backward (its time
    # in docs/notes/large-molecules.md, "Where the time went"). As in optimize_acqf, the
    # warnings of the search are recorded and dropped (BoTorch forces its own to
    # "always"): L-BFGS-B's stops are no failure of the search, its best point stands,
    # and a variance below GPyTorch's floor is raised to it.
    with warnings.catch_warnings(record=True):
        candidates, values = gen_candidates_scipy(
            initial,
            acquisition,
            lower_bounds=lower,
            upper_bounds=upper,
            # BoTorch's batched L-BFGS-B takes ftol only with factr set to None
            options={"maxiter": maxiter, "ftol": tolerance, "factr": None},
        )  # (s, 1, d), (s,)
    best = int(torch.argmax(values))
    return model.positions(candidates[best].detach())[0], offset - float(values[best])


class ShortenedStepError(RuntimeError):
    """The step cut back to ``maxstep`` ends where the model predicts no descent."""

    reason = "shortened"  # as recorded in a proposal's ``retried``


def search(context, starts):
    """The model's proposal: its lower confidence bound minimised in the trust box.

    A search fails where the prior calculator fails at a configuration it tries, where
    it goes beyond ``maxstep`` and the step cut back to it leaves the model's descent
    (:func:`shortened_step`), or where the model's own uncertainty leaves its drop in
    doubt (:func:`asebo.optimize.trust.check_confident`); it is then repeated in a box
    half the size, closer to the configurations computed. Where that doubt is the noise
    on the model's slope, which no smaller box removes (a
    :class:`asebo.optimize.trust.SlopeNoiseError`), it is repeated once in a box the
    size of the length along the step where the drop is surest, the trust region cut to
    it, and that search's proposal stands. Where the model curves down along the step
    only by its interpolation (:func:`asebo.optimize.trust.check_curvature_supported`),
    the box stays and the search is repeated with the prior's curvature along that step
    in place of the model's (:class:`EnergyModel`'s ``corrections``), as the checks at
    convergence read such a mode
    (:func:`asebo.optimize.model_hessian.prior_where_interpolated`): the fault lies
    along one direction, not in the box, and a trust region halved for it stays small
    for the steps after, which then crawl (docs/notes/large-molecules.md, "A refused
    direction corrected, not the box halved"). From a second such refusal on, the
    interpolation fails in more than one direction at this size, and the box of this
    step's searches halves too; the trust region stays. Under a model prior, the first
    such refusal of a step corrects every mode of the model's Hessian at the centre
    along which only the interpolation curves down
    (:func:`asebo.optimize.model_hessian.interpolated_descents`), the refused step too
    where it still curves down with those added (:func:`curves_down`): corrected one at
    a time, each repeat would find the next such direction. Under a prior calculator the
    Hessian would cost ``6N`` of its calls, and the refused step alone is corrected. A
    repeat after such a direction starts at the lowest corrected bound on the line from
    the centre to where the refused search ended (:func:`lowest_on_segment`), one after
    another error from where the refused search ended (clipped into a smaller box, which
    still holds its direction); up to ``settings.search.retries`` searches in all. The
    last search's proposal stands whatever its uncertainty, and so does one in the
    smallest box, or where only rigid forces are left (the shape has converged: the
    model has no drop left to be confident of). Each search stops when an iteration
    gains less than ``settings.search.tolerance`` (under a prior calculator
    ``calculator_tolerance``) times the atoms it moves (:func:`minimize_lcb`). Each of
    these repairs turns off alone in ``settings.rules``
    (:class:`asebo.optimize.settings.Rules`).

    Parameters
    ----------
    context : asebo.optimize.proposal.StepContext
    starts : list of arrays (n, 3)
        Where the first search starts.

    Returns
    -------
    asebo.optimize.proposal.Proposal
        Reason ``'search'``, without its predicted energy; or ``'search_failed'``
        with no positions when every search failed.
    """
    gp, centre, trust = context.gp, context.centre, context.trust
    settings, confidence = context.settings.search, context.settings.trust_region.confidence
    rules = context.settings.rules
    moving_atoms = max(int(context.free.any(axis=1).sum()), 1)
    tolerance = settings.calculator_tolerance if gp.prior.is_calculator else settings.tolerance
    preconditioner = (
        metric_preconditioner(gp.metric, centre, context.free) if settings.preconditioned else None
    )
    box = trust  # of this step's searches: smaller than the trust region from a
    # second refusal as overturned on
    retried, notes, directions, curvatures = [], [], [], []
    standing = False  # a box sized where the slope's noise leaves the drop surest
    for attempt in range(settings.retries + 1):
        corrections = (directions, curvatures) if directions else None
        try:
            found, _ = minimize_lcb(
                gp,
                torch.as_tensor(np.array(starts)),
                torch.as_tensor(centre),
                box.radius,
                torch.as_tensor(context.free.reshape(-1)),
                settings.kappa,
                settings.maxiter,
                tolerance * moving_atoms,
                preconditioner=preconditioner,
                corrections=corrections,
                subspace=context.subspace,
            )
            starts = [found.numpy()]  # a search again in a smaller box starts here
            positions = (
                shortened_step(gp, centre, starts[0], context.maxstep)
                if rules.shortened_retry
                else within_maxstep(centre, starts[0], context.maxstep)
            )
            checked = confidence is not None and attempt < settings.retries
            if checked and not box.at_floor and not context.rigid_left and not standing:
                if rules.uncertain_retry:
                    shortest = box.settings.floor if rules.slope_noise_box else None
                    check_confident(gp, centre, positions, confidence, shortest)
                if rules.overturned_curvature:
                    check_curvature_supported(gp, centre, positions, context.observations)
        except OverturnedCurvatureError as error:
            if rules.interpolated_modes and not directions and not gp.prior.is_calculator:
                modes, excesses = interpolated_descents(
                    gp, centre, context.free, context.observations.arrays()
                )
                directions.extend(modes)
                curvatures.extend(excesses)
            if not directions or curves_down(gp, centre, error.direction, directions, curvatures):
                directions.append(error.direction)
                curvatures.append(error.excess)
            if rules.segment_restart:
                starts = [
                    lowest_on_segment(
                        gp, centre, starts[0], settings.kappa, (directions, curvatures)
                    )
                ]
            retried.append(error.reason)
            note = f"{error}; the search takes the prior's curvature along that step"
            if rules.overturned_box_halving and retried.count(error.reason) > 1:
                box = box.shrunk()
                note += f", in a box of {box.radius:.3g} Å for this step"
            notes.append(note)
            continue
        except SlopeNoiseError as error:
            trust, box, standing = trust.within(error.length), box.within(error.length), True
            retried.append(error.reason)
            notes.append(
                f"{error}; the search is repeated in a box of {box.radius:.3g} Å, whose "
                "proposal stands"
            )
            continue
        except (PriorCalculationError, ShortenedStepError, UncertainStepError) as error:
            retried.append(error.reason)
            if isinstance(error, PriorCalculationError) and not rules.prior_failure_retry:
                notes.append(f"{error}; the step goes along the forces")
                break
            trust, box = trust.shrunk(), box.shrunk()
            notes.append(f"{error}; the trust radius is halved to {trust.radius:.3g} Å")
            continue
        return Proposal(positions, None, trust, SEARCH, tuple(retried), tuple(notes))
    return Proposal(None, None, trust, SEARCH_FAILED, tuple(retried), tuple(notes))


def curves_down(gp, centre, direction, directions, curvatures):
    """Whether the model's curvature at ``centre`` (n, 3) along the unit ``direction``
    (3n,), with ``curvatures`` added along the unit ``directions`` as
    :class:`EnergyModel` adds them, is still negative."""
    model = directional_curvature(gp, centre, direction)
    added = sum(a * float(np.dot(d, direction)) ** 2 for d, a in zip(directions, curvatures))
    return model + added < 0.0


SEGMENT_POINTS = 9  # configurations from the centre to a refused end, both included


def lowest_on_segment(gp, centre, end, kappa, corrections):
    """The configuration of lowest bound ``mu - kappa sigma`` on the straight line from
    ``centre`` to ``end`` (each (n, 3)), the mean with ``corrections``: where the search
    repeated after a refused direction starts.

    The refused search ended far along the direction the correction stiffens: in the
    hundreds of coordinates of a large molecule its end can lie far above the centre
    by the corrected mean, and a search started there spends most of its evaluations
    coming back (docs/notes/large-molecules.md, "The repeated searches"). On
    the line the corrected bound is lowest where the prior's curvature along the
    direction balances the model's slope; the other coordinates keep what the refused
    search found.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
    centre, end : arrays (n, 3)
    kappa : float
    corrections : tuple of lists
        Unit directions (3n,) and curvatures, eV/Å², as :class:`EnergyModel` takes them.

    Returns
    -------
    array (n, 3)
    """
    centre, end = np.asarray(centre, dtype=np.float64), np.asarray(end, dtype=np.float64)
    fractions = np.linspace(0.0, 1.0, SEGMENT_POINTS)  # (t,)
    line = centre[None] + fractions[:, None, None] * (end - centre)[None]  # (t, n, 3)
    mean, std = gp.predict(line, return_std=True)  # (t,), (t,)
    directions, curvatures = (np.asarray(part) for part in corrections)  # (k, 3n), (k,)
    displacements = (line - centre).reshape(len(line), -1)  # (t, 3n)
    bound = mean + added_energy(displacements, directions, curvatures) - kappa * std
    return line[int(np.argmin(bound))]


def within_maxstep(centre, proposal, maxstep):
    """``proposal`` (n, 3) itself, or moved towards ``centre`` on the straight line
    until no atom moves more than ``maxstep``."""
    step = proposal - centre  # (n, 3)
    longest = np.linalg.norm(step, axis=1).max()
    return proposal if longest <= maxstep else centre + step * (maxstep / longest)


def shortened_step(gp, centre, proposal, maxstep):
    """``proposal`` (n, 3) moved towards ``centre`` until no atom moves more than maxstep.

    The search follows the model's surface, which can curve (a group turning about a
    torsion); the shortened step lies on the straight line to its end instead, and
    where that line cuts across the curve (bonds squeezed on the chord of the turn)
    it leaves the descent the search found. The descent is measured from the model's
    mean at ``centre``, as in :func:`asebo.optimize.trust.check_confident`: where the GP
    allows noise, the energy computed there can lie below that mean (a grid's egg-box
    gain), and a step the model puts below the centre is still a descent by the model.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The fitted model.
    centre, proposal : ndarray (n, 3)
        Where the search started (the lowest energy seen) and where it ended.
    maxstep : float
        Largest displacement of any atom, Å.

    Returns
    -------
    ndarray (n, 3)
        ``proposal`` itself when no atom moves more than ``maxstep``.

    Raises
    ------
    ShortenedStepError
        When the model predicts the shortened step at or above its mean at ``centre``.
    """
    positions = within_maxstep(centre, proposal, maxstep)
    if positions is proposal:
        return proposal
    mean = gp.predict(np.array([positions, centre]))  # (2,)
    rise = float(mean[0] - mean[1])
    if rise >= 0:
        longest = np.linalg.norm(proposal - centre, axis=1).max()
        raise ShortenedStepError(
            f"the search went {longest:.3g} Å, and its step cut back to maxstep = "
            f"{maxstep:.3g} Å ends {rise:.3g} eV above the lowest configuration "
            "seen, by the model"
        )
    return positions
