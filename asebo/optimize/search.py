r"""The lower confidence bound on the GP's energy, minimised in a trust box through BoTorch.

``LCB(x) = mu(x) - kappa sigma(x)`` (Wong and Kolter, eq. 35) is BoTorch's
``UpperConfidenceBound(model, beta=kappa**2, maximize=False)``, which returns
``-LCB``; BoTorch's ``gen_candidates_scipy`` maximises it with L-BFGS-B inside box
bounds: a trust box around the best configuration, on the free coordinates only
(:func:`minimize_lcb`). A negative ``kappa`` makes the bound pessimistic, ``mu +
|kappa| sigma`` (:class:`PessimisticBound`): the search then prefers the steps the
model is sure of to those it merely hopes for.

In :func:`minimize_lcb`, L-BFGS-B stops when an iteration changes the bound by less
than ``tolerance`` times ``max(|bound|, 1 eV)``. Measured from the model's energy at
``centre``, the bound of a step is a drop below 1 eV, and the stop is a change below
``tolerance`` eV, whatever the reference of the energy (a total energy of thousands of
eV, a DFT energy relative to atoms). With a ``preconditioner`` the search runs
unconstrained in the box's coordinates
(:class:`asebo.optimize.preconditioning.BoxCoordinates`), else in the free coordinates
within L-BFGS-B's bounds.

:func:`search` is the search of one step, repeated in smaller boxes where it fails.
A search that goes beyond ``maxstep`` is cut back to it on the straight line to its
end (:func:`within_maxstep`). A search fails where the prior calculator fails at a
configuration it tries, or where the model's own uncertainty leaves its drop in doubt
(:func:`asebo.optimize.trust.check_confident`); it is then repeated in a box half the
size, closer to the configurations computed. Where that doubt is the noise on the
model's slope, which no smaller box removes (a
:class:`asebo.optimize.trust.SlopeNoiseError`), it is repeated once in a box the size
of the length along the step where the drop is surest, the trust region cut to it, and
that search's proposal stands. Where the model curves down along the step only by its
interpolation (:func:`asebo.optimize.trust.check_curvature_supported`), the box stays
and the search is repeated with the prior's curvature along that step in place of the
model's (:class:`EnergyModel`'s ``corrections``), as the checks at convergence read
such a mode (:func:`asebo.optimize.model_hessian.prior_where_interpolated`): the fault
lies along one direction, not in the box, and a trust region halved for it stays small
for the steps after, which then crawl (docs/notes/large-molecules.md, "A refused
direction corrected, not the box halved"). Under a model prior, the first
such refusal of a step corrects every mode of the model's Hessian at the centre along
which only the interpolation curves down
(:func:`asebo.optimize.model_hessian.interpolated_descents`), the refused step too
where it still curves down with those added (:func:`curves_down`): corrected one at a
time, each repeat would find the next such direction. Under a prior calculator the
Hessian would cost ``6N`` of its calls, and the refused step alone is corrected. A
repeat after such a direction starts at the lowest corrected bound on the line from
the centre to where the refused search ended (:func:`lowest_on_segment`), one after
another error from where the refused search ended: clipped onto the smaller box's faces,
or under a prior calculator, where each evaluation is one of its calls, moved on the
straight line into the box (:func:`drawn_into_box`); up to ``settings.search.retries``
searches in all. The last search's proposal stands whatever its uncertainty, and so does
one in the smallest box, or where only rigid forces are left (the shape has converged:
the model has no drop left to be confident of). Each search stops when an iteration
gains less than ``settings.search.tolerance`` (under a prior calculator
``calculator_tolerance``) times the atoms it moves (:func:`minimize_lcb`). Each of these
repairs turns off alone in ``settings.rules`` (:class:`asebo.optimize.settings.Rules`).
"""

import warnings
from dataclasses import dataclass, field

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
from asebo.optimize.preconditioning import INSIDE, BoxCoordinates, metric_preconditioner
from asebo.optimize.proposal import SEARCH, SEARCH_FAILED, Proposal, StepContext
from asebo.optimize.trust import (
    OverturnedCurvatureError,
    SlopeNoiseError,
    TrustRegion,
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
        > 0 explores, 0 minimises the posterior mean, < 0 penalises uncertain steps.
    maxiter : int
        L-BFGS-B iterations.
    tolerance : float
        eV: the search stops when an iteration lowers the bound by less than this.
    preconditioner : tuple of arrays (d, d), optional
        ``P`` and ``P^{-1}`` (:func:`asebo.optimize.preconditioning.preconditioner`).
    corrections : tuple of arrays (k, 3n) and (k,), optional
        Curvatures added to the mean along unit directions (:class:`EnergyModel`).
    subspace : asebo.optimize.subspace.FreeSubspace, optional
        Displacements from ``centre`` the constraints allow: the search moves within them.

    Returns
    -------
    positions : tensor (n, 3)
    lcb : float
        ``mu - kappa sigma`` there.
    """
    offset = float(gp.predict(centre.numpy()[None])[0])
    initial, lower, upper, box = search_space(starts, centre, radius, free, preconditioner)
    model = EnergyModel(gp, centre, free, offset, box, corrections, subspace)
    acquisition = bound_to_maximise(model, kappa)
    found, value = best_candidate(acquisition, initial, lower, upper, maxiter, tolerance)
    return model.positions(found)[0], offset - value


def search_space(starts, centre, radius, free, preconditioner):
    """Where L-BFGS-B starts and how far it may go: the box ``centre +- radius`` on the
    ``d`` free coordinates, or with a ``preconditioner`` the box's coordinates
    (:class:`asebo.optimize.preconditioning.BoxCoordinates`), unbounded.

    Parameters
    ----------
    starts : tensor (s, n, 3)
    centre : tensor (n, 3)
    radius : float
    free : bool tensor (3n,)
    preconditioner : tuple of arrays (d, d) or None

    Returns
    -------
    initial : tensor (s, 1, d)
        ``starts`` clipped into the box, in the box's coordinates where it has them.
    lower, upper : tensors (d,) or None
        The box's bounds on the free coordinates; None with a ``preconditioner``.
    box : asebo.optimize.preconditioning.BoxCoordinates or None
    """
    middle = centre.reshape(-1)[free]  # (d,)
    lower, upper = middle - radius, middle + radius
    initial = starts.reshape(len(starts), -1)[:, free]
    initial = torch.minimum(torch.maximum(initial, lower), upper)  # (s, d)
    box = None
    if preconditioner is not None:
        box = BoxCoordinates(middle, radius, *preconditioner)
        initial, lower, upper = box.from_box(initial), None, None
    return initial[:, None, :], lower, upper, box


def best_candidate(acquisition, initial, lower, upper, maxiter, tolerance):
    """Maximise ``acquisition`` with BoTorch's batched L-BFGS-B from each of ``initial``
    (s, 1, d) within the bounds ``lower``, ``upper`` (d,) each, or None: the best
    candidate (1, d) found and its value."""
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
    return candidates[best].detach(), float(values[best])


def search(context, starts):
    """The model's proposal: its lower confidence bound minimised in the trust box, the
    search repeated where it fails, as the module's description says.

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
    searches = StepSearches.starting(context, starts)
    for attempt in range(context.settings.search.retries + 1):
        try:
            positions = searches.searched(attempt)
        except OverturnedCurvatureError as error:
            searches.after_overturned(error)
        except SlopeNoiseError as error:
            searches.after_slope_noise(error)
        except (PriorCalculationError, UncertainStepError) as error:
            if not searches.after_failure(error):
                break
        else:
            return searches.proposal(positions)
    return searches.proposal(None)


@dataclass
class StepSearches:
    """What the searches of one step (:func:`search`) hand on from one to the next.

    Attributes
    ----------
    context : asebo.optimize.proposal.StepContext
    preconditioner : tuple of arrays (d, d) or None
        Of the box's coordinates (:func:`minimize_lcb`), fixed for the step.
    tolerance : float
        eV: the stop of every search, ``settings.search.tolerance`` (under a prior
        calculator ``calculator_tolerance``) times the atoms it moves.
    trust : asebo.optimize.trust.TrustRegion
        The trust region, whose box the next search searches: halved where a search
        fails, sized by the slope's noise after a :class:`SlopeNoiseError`.
    starts : list of arrays (n, 3)
        Where the next search starts.
    standing : bool
        The box is sized where the slope's noise leaves the drop surest: the next
        search's proposal stands.
    retried, notes : lists of str
        Why each search was repeated, and the log's lines on it.
    directions, curvatures : lists of arrays (3n,) and floats
        Unit directions and the prior's curvatures along them, eV/Å², that the mean
        takes (:class:`EnergyModel`'s ``corrections``).
    """

    context: StepContext
    preconditioner: tuple | None
    tolerance: float
    trust: TrustRegion
    starts: list
    standing: bool = False
    retried: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    directions: list = field(default_factory=list)
    curvatures: list = field(default_factory=list)

    @classmethod
    def starting(cls, context, starts):
        """The searches of the step ``context`` decides, the first from ``starts``."""
        settings = context.settings.search
        moving_atoms = max(int(context.free.any(axis=1).sum()), 1)
        tolerance = (
            settings.calculator_tolerance if context.gp.prior.is_calculator else settings.tolerance
        )
        preconditioner = (
            metric_preconditioner(context.gp.metric, context.centre, context.free)
            if settings.preconditioned
            else None
        )
        return cls(context, preconditioner, tolerance * moving_atoms, context.trust, starts)

    def searched(self, attempt):
        """The proposal (n, 3) of search number ``attempt`` (from 0), cut to ``maxstep``
        and checked; the next search, should this one fail, starts where it ended.

        Raises
        ------
        asebo.model.priors.PriorCalculationError,
        asebo.optimize.trust.UncertainStepError, asebo.optimize.trust.SlopeNoiseError,
        asebo.optimize.trust.OverturnedCurvatureError
            Where the search fails, as :func:`search` repeats it.
        """
        self.starts = [self.lcb_minimum()]  # a search again in a smaller box starts here
        positions = within_maxstep(self.context.centre, self.starts[0], self.context.maxstep)
        if self.checks(attempt):
            self.check(positions)
        return positions

    def lcb_minimum(self):
        """Where the bound's minimum lies in this search's box (n, 3)."""
        context, settings = self.context, self.context.settings.search
        starts = self.starts
        if context.gp.prior.is_calculator and context.settings.rules.line_start:
            starts = [drawn_into_box(context.centre, start, self.trust.radius) for start in starts]
        found, _ = minimize_lcb(
            context.gp,
            torch.as_tensor(np.array(starts)),
            torch.as_tensor(context.centre),
            self.trust.radius,
            torch.as_tensor(context.free.reshape(-1)),
            settings.kappa,
            settings.maxiter,
            self.tolerance,
            preconditioner=self.preconditioner,
            corrections=(self.directions, self.curvatures) if self.directions else None,
            subspace=context.subspace,
        )
        return found.numpy()

    def checks(self, attempt):
        """Whether search number ``attempt`` (from 0) has its proposal checked: not
        without a ``confidence``, nor the last search, one in the smallest box, one where
        only rigid forces are left or one that stands."""
        context = self.context
        confidence = context.settings.trust_region.confidence
        checked = confidence is not None and attempt < context.settings.search.retries
        return checked and not self.trust.at_floor and not context.rigid_left and not self.standing

    def check(self, positions):
        """Raise where the model doubts its drop to ``positions`` (n, 3)
        (:func:`asebo.optimize.trust.check_confident`) or curves down along the step
        only by its interpolation (:func:`asebo.optimize.trust.check_curvature_supported`),
        each where ``settings.rules`` has it."""
        context, rules = self.context, self.context.settings.rules
        gp, centre = context.gp, context.centre
        if rules.uncertain_retry:
            shortest = self.trust.settings.floor if rules.slope_noise_box else None
            check_confident(
                gp, centre, positions, context.settings.trust_region.confidence, shortest
            )
        if rules.overturned_curvature:
            check_curvature_supported(gp, centre, positions, context.observations)

    def after_overturned(self, error):
        """After ``error``, an :class:`asebo.optimize.trust.OverturnedCurvatureError`: the
        prior's curvature along its step (:meth:`correct`), the next search from the
        lowest bound on the refused segment, in the same box."""
        rules = self.context.settings.rules
        self.correct(error)
        if rules.segment_restart:
            corrections = (self.directions, self.curvatures)
            kappa = self.context.settings.search.kappa
            self.starts = [
                lowest_on_segment(
                    self.context.gp, self.context.centre, self.starts[0], kappa, corrections
                )
            ]
        self.retried.append(error.reason)
        self.notes.append(f"{error}; the search takes the prior's curvature along that step")

    def correct(self, error):
        """Add the prior's curvature along the step of ``error``, an
        :class:`asebo.optimize.trust.OverturnedCurvatureError`, to the mean's corrections;
        at a step's first refusal under a model prior, along every mode at the centre
        where only the interpolation curves down too, and then along the step only where
        the model still curves down."""
        gp, centre = self.context.gp, self.context.centre
        rules = self.context.settings.rules
        if rules.interpolated_modes and not self.directions and not gp.prior.is_calculator:
            modes, excesses = interpolated_descents(
                gp, centre, self.context.free, self.context.observations.arrays()
            )
            self.directions.extend(modes)
            self.curvatures.extend(excesses)
        if not self.directions or curves_down(
            gp, centre, error.direction, self.directions, self.curvatures
        ):
            self.directions.append(error.direction)
            self.curvatures.append(error.excess)

    def after_slope_noise(self, error):
        """After ``error``, an :class:`asebo.optimize.trust.SlopeNoiseError`: the trust
        region and the box cut to the length where the drop is surest, and the next
        search's proposal stands."""
        self.trust = self.trust.within(error.length)
        self.standing = True
        self.retried.append(error.reason)
        self.notes.append(
            f"{error}; the search is repeated in a box of {self.trust.radius:.3g} Å, whose "
            "proposal stands"
        )

    def after_failure(self, error):
        """After ``error``, a failed prior calculation or a doubted drop: whether a
        search is repeated, in a box and trust region halved (not after a prior's
        failure where ``settings.rules.prior_failure_retry`` is off). A failed prior
        calculation is a note for the log; a doubted drop, routine near convergence, is
        counted on the step's line (:func:`asebo.optimize.step_log.step_reason`)."""
        self.retried.append(error.reason)
        if (
            isinstance(error, PriorCalculationError)
            and not self.context.settings.rules.prior_failure_retry
        ):
            self.notes.append(f"{error}; the step goes along the forces")
            return False
        self.trust = self.trust.shrunk()
        if not isinstance(error, UncertainStepError):  # the step line counts those
            self.notes.append(f"{error}; the trust radius is halved to {self.trust.radius:.3g} Å")
        return True

    def proposal(self, positions):
        """The step's :class:`asebo.optimize.proposal.Proposal`: the search's at ``positions``
        (n, 3), or the failed search's where they are None."""
        reason = SEARCH_FAILED if positions is None else SEARCH
        return Proposal(positions, None, self.trust, reason, tuple(self.retried), tuple(self.notes))


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


def drawn_into_box(centre, start, radius):
    """``start`` (n, 3) itself where it lies within ``INSIDE`` times ``radius`` of
    ``centre`` (n, 3) in every coordinate, else moved towards ``centre`` on the straight
    line until it does.

    A search repeated in a smaller box starts where the search before it ended. Clipped
    coordinate by coordinate onto the smaller box's faces, that end enters the box's
    coordinates (:class:`asebo.optimize.preconditioning.BoxCoordinates`) where ``tanh``
    passes a twenty-fifth of the gradient in every clipped coordinate: L-BFGS-B then
    spends its evaluations coming off the faces, and may stop above the centre. On the
    line the start keeps the direction of the search before and lies inside the box.
    """
    step = start - centre  # (n, 3)
    reach = np.abs(step).max()
    limit = INSIDE * radius
    return start if reach <= limit else centre + step * (limit / reach)


def within_maxstep(centre, proposal, maxstep):
    """``proposal`` (n, 3) itself, or moved towards ``centre`` on the straight line
    until no atom moves more than ``maxstep``."""
    step = proposal - centre  # (n, 3)
    longest = np.linalg.norm(step, axis=1).max()
    return proposal if longest <= maxstep else centre + step * (maxstep / longest)
