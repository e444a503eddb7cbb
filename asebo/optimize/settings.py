"""The tuned settings of :class:`asebo.BOOptimizer`, one frozen dataclass per concern.

Each is an argument of the optimizer (``search=``, ``trust_region=``, ``model=``,
``special_cases=``) whose defaults are the values measured best; change one field
with :func:`dataclasses.replace` or by naming it, ``SearchSettings(retries=1)``.
The optimizer's ``kappa``, ``maxstep``, ``trust_radius``, ``recentre`` and
``gp_options`` are shortcuts that write into their fields; the optimizer's
``settings``, one :class:`Settings` resolved once for its prior and representation
(:func:`asebo.optimize.resolve.resolve_settings`), is what every part of it reads.
The settings of a representation of the configurations (the fold threshold of the
internal coordinates) are fields of its own object
(:mod:`asebo.optimize.representations`). :func:`settings_table` lists every field,
as the documentation's table of settings does. :class:`Rules` switches each
special-case rule of the step and of the check at convergence off alone (``rules=``),
for ``asebo bench ablation``.
"""

import inspect
import re
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace


@dataclass(frozen=True)
class SearchSettings:
    """The search of the lower confidence bound ``mu - kappa sigma``.

    Attributes
    ----------
    kappa : float or None
        Weight of the uncertainty in ``mu - kappa sigma``: > 0 explores (the lower
        confidence bound of Wong and Kolter, eq. 35), 0 minimises the mean, < 0
        penalises uncertain steps (:class:`asebo.optimize.search.PessimisticBound`).
        None chooses by the number of coordinates searched (:meth:`kappa_for`).
    optimistic_kappa, pessimistic_kappa : float
        ``kappa`` when it is None: ``optimistic_kappa`` for fewer than
        ``pessimistic_from`` free coordinates and under a prior calculator,
        ``pessimistic_kappa`` otherwise.
    pessimistic_from : int
        Free coordinates (three per free atom, and a filter's nine cell coordinates)
        from which the default bound is pessimistic. The lowest point of the model's
        mean over a box of ``d`` coordinates is where the GP's error happens to be most
        negative, an error that grows with ``d`` (the optimizer's curse; Smith and
        Winkler, Management Science 52, 311, 2006); a prior calculator's surface leaves
        the GP little to correct.
    retries : int
        Searches repeated after one that failed: in a box half the size (a prior
        calculator that fails, a step cut back to ``maxstep`` that leaves the descent,
        a drop the model doubts), or in the same box with the prior's curvature along
        a step only the GP's interpolation curves down along
        (:func:`asebo.optimize.search.search`), before the step turns into a step
        along the forces.
    maxiter : int
        L-BFGS-B iterations of one search.
    tolerance : float
        eV per moving atom: the search stops when an L-BFGS-B iteration lowers the
        bound by less than this times the number of atoms it moves (an energy is
        a sum over atoms; the precision a step needs grows with them).
    calculator_tolerance : float
        eV per moving atom: ``tolerance`` under a prior calculator, whose model is
        accurate enough that the search's precision is the step's.
    reference_fmax : float
        eV/Å: the force criterion the tolerances are set for. A run to a smaller
        ``fmax`` searches with both tolerances times ``(fmax / reference_fmax)**2``
        (:meth:`for_force_criterion`): near a minimum the energy a step gains falls as
        the square of the forces, and a search that stops at a coarser precision
        creeps along a soft valley in steps the forces cannot tell apart.
    new : float
        Å: a proposal closer than this to a configuration computed teaches the model
        nothing, and the step goes along the forces instead.
    preconditioned : bool
        Under the internal-coordinate kernel, search in coordinates of the trust box
        scaled by the Hessian of the Lindh model its metric is built from, at the box's
        centre (:mod:`asebo.optimize.preconditioning`); False, or another kernel,
        searches the Cartesian box.
    """

    kappa: float | None = None
    optimistic_kappa: float = 0.1
    pessimistic_kappa: float = -3.0
    pessimistic_from: int = 90
    retries: int = 3
    maxiter: int = 200
    tolerance: float = 2e-7
    calculator_tolerance: float = 5e-8
    new: float = 1e-6
    reference_fmax: float = 0.05
    preconditioned: bool = True

    def for_force_criterion(self, fmax):
        """These settings for a run to ``fmax`` eV/Å (None: as they are): below
        ``reference_fmax`` both tolerances times ``(fmax / reference_fmax)**2``."""
        if fmax is None or fmax >= self.reference_fmax:
            return self
        scale = (fmax / self.reference_fmax) ** 2
        return replace(
            self,
            tolerance=self.tolerance * scale,
            calculator_tolerance=self.calculator_tolerance * scale,
        )

    def kappa_for(self, free_coordinates, prior_calculator):
        """``kappa``, or where it is None the default for a search over
        ``free_coordinates`` coordinates, with or without a prior calculator."""
        if self.kappa is not None:
            return self.kappa
        if prior_calculator or free_coordinates < self.pessimistic_from:
            return self.optimistic_kappa
        return self.pessimistic_kappa


@dataclass(frozen=True)
class TrustSettings:
    """The trust region: how far from the lowest configuration the search goes.

    Attributes
    ----------
    maxstep, radius : float or None
        Å: the largest displacement of an atom in one step and the first half-width of
        the trust box; None takes the defaults below, which depend on the prior.
    default_maxstep, default_radius : float
        Å: the defaults, except under a prior calculator.
    calculator_maxstep, calculator_radius : float
        Å: the defaults under a prior calculator, whose surface holds far from the
        configurations computed.
    grow, shrink : float
        Factors on the radius after a good and a poor prediction.
    good : float
        A prediction error below ``good`` times the predicted drop is good.
    floor : float
        Å: the smallest radius; the last search there is not checked for confidence.
    force_step : float
        Å: the shortest step along the forces, and the longest rigid move.
    confidence : float or None
        Standard deviations of the model's own uncertainty its predicted drop must
        reach before a call (:func:`asebo.optimize.trust.check_confident`); None
        checks nothing, neither the drop nor the curvature along the step
        (:func:`asebo.optimize.trust.check_curvature_supported`).
    """

    maxstep: float | None = None
    radius: float | None = None
    default_maxstep: float = 0.2
    default_radius: float = 0.1
    calculator_maxstep: float = 0.6
    calculator_radius: float = 0.13
    grow: float = 2.0
    shrink: float = 0.5
    good: float = 0.5
    floor: float = 1e-3
    force_step: float = 0.02
    confidence: float | None = 3.0


@dataclass(frozen=True)
class ModelSettings:
    """The GP and its prior, beyond what the representation and the prior choose.

    Attributes
    ----------
    trend : float or None
        Slope variance of the GP's linear trend over a gradient's variance
        (:class:`asebo.kernels.trend.LinearTrend`); None takes the representation's
        default (30 with internal coordinates and the periodic kernel, 0 otherwise).
        The optimizer's ``gp_options['trend']`` writes into it.
    prior_curvature : float
        Variance of the GP's random scale on a prior calculator's curvature
        (:class:`asebo.kernels.prior_scale.PriorCurvature`); only under a prior
        calculator: resolved, it is 0 without one unless the optimizer's
        ``gp_options['prior_curvature']`` writes into it.
    recentre : float or None
        eV: the Lindh prior (the pair springs for periodic cells) is rebuilt around
        the lowest configuration when it puts that configuration this far above its
        minimum; None takes the representation's default (2 eV with internal
        coordinates, 0.3 otherwise).
    lindh_stiffness : float
        The Lindh prior's force constants relative to Lindh's model
        (:class:`asebo.model.priors.RecentredLindh`).
    gp_options : dict
        Further options of :class:`asebo.model.gp.EnergyForceGP` (``gamma``,
        ``fit_gamma``, ``energy_noise``, ``gradient_noise``...), where the optimizer's
        ``gp_options`` other than ``trend`` and ``prior_curvature`` go; ``proper`` and
        ``radial`` go to the GP's kernel object of the representation, unless
        ``kernel`` gives the kernel object itself.
    """

    trend: float | None = None
    prior_curvature: float = 1.0
    recentre: float | None = None
    lindh_stiffness: float = 0.7
    gp_options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SpecialCases:
    """The named stages that adjust a proposal (:mod:`asebo.optimize.stages`).

    Attributes
    ----------
    rigid_shrink : float
        The rigid move's length is ``force_step`` times this for every call since
        the lowest energy was found.
    curvature_steps : int
        At most this many steps of a run along a negative curvature of the model
        where the forces are converged (:func:`asebo.optimize.endpoint.descend_negative_curvature`).
    quadratic_drop : float or None
        eV: where the forces are converged but the model's quadratic at the latest
        configuration puts its minimum more than this below the lowest energy computed
        (:meth:`asebo.optimize.model_hessian.ModelCurvature.quadratic_drop`), the run
        goes on: a floppy molecule stopped on the shoulder of a long, shallow valley.
        None: the forces alone decide, as they do for a periodic system.
    symmetry_probe : float or None
        Å: where the forces of a molecule are converged on a point-group symmetry
        that every configuration of the run kept, the model's curvature along the
        modes that break it is its prior's alone (:mod:`asebo.optimize.symmetry`):
        one call displaced along the softest of them, its largest atomic move this
        long, tells a saddle (an eclipsed rotor) from a minimum. None: the log
        line at convergence only says so.
    """

    rigid_shrink: float = 0.5
    curvature_steps: int = 2
    quadratic_drop: float | None = 0.003
    symmetry_probe: float | None = None


@dataclass(frozen=True)
class Settings:
    """All the settings of one optimizer, resolved for its prior and representation.

    Resolved (:func:`asebo.optimize.resolve.resolve_settings`), no field the optimizer
    reads is None but those whose None is a choice (``trust_region.confidence``,
    ``special_cases.quadratic_drop``, ``special_cases.symmetry_probe``).

    Attributes
    ----------
    search : SearchSettings
        The search's.
    trust_region : TrustSettings
        The trust region's.
    model : ModelSettings
        The GP's and its prior's.
    special_cases : SpecialCases
        The named stages'.
    """

    search: SearchSettings = SearchSettings()
    trust_region: TrustSettings = TrustSettings()
    model: ModelSettings = ModelSettings()
    special_cases: SpecialCases = SpecialCases()
    rules: "Rules" = field(default_factory=lambda: Rules())


@dataclass(frozen=True)
class WalkTrustSettings:
    """The trust radius of a walk on the model, a band's relaxation or a saddle search's
    walk, judged after each call by the model's force error there
    (:func:`asebo.optimize.walk_trust.adapted_radius`).

    Attributes
    ----------
    good : float
        The radius doubles after a walk it stopped where the largest atomic error of
        the predicted forces is below ``good`` times the largest computed force (or
        ``fmax``); it halves where the error exceeds that force.
    min_radius : float
        Å: the smallest radius.
    bisections : int
        Halvings of a step that crosses the radius, to find where it crosses
        (:func:`asebo.optimize.walk_trust.cut_back`).
    """

    good: float = 0.3
    min_radius: float = 0.02
    bisections: int = 30


@dataclass(frozen=True)
class BandSettings:
    """The settings of :class:`asebo.neb.BONEB`, an argument of it (``settings=``); its
    ``trust_radius``, ``max_trust_radius`` (``maxstep``), ``uncertainty``,
    ``model_fmax`` and ``model_steps`` are shortcuts into these fields.

    Attributes
    ----------
    trust_radius : float
        Å: the first trust radius, how far an image relaxed on the model may go from
        the configurations computed (or from its place before the relaxation).
    max_trust_radius : float
        Å: the largest the trust radius grows to.
    uncertainty : float
        eV: the GP's standard deviation above which an image is computed before the
        climbing image.
    model_fmax : float or None
        eV/Å: the NEB forces the band is relaxed to on the model; None takes a fifth of
        the run's ``fmax``.
    model_steps : int
        Steps of the band's optimizer per relaxation on the model at most.
    hyper_window : int
        The observations whose marginal likelihood gives the GP its length scale: every
        one (up to half of the GP's ``max_size`` rows), as a band's calls spread over
        its images.
    walk : WalkTrustSettings
        How the trust radius follows the model's force error.
    """

    trust_radius: float = 0.2
    max_trust_radius: float = 0.5
    uncertainty: float = 0.05
    model_fmax: float | None = None
    model_steps: int = 400
    hyper_window: int = 10**6
    walk: WalkTrustSettings = WalkTrustSettings()


@dataclass(frozen=True)
class SaddleSettings:
    """The settings of :class:`asebo.saddle.BOSaddle`, an argument of it (``settings=``);
    its ``trust_radius``, ``max_trust_radius`` (``maxstep``), ``model_fmax`` and
    ``model_steps`` are shortcuts into these fields.

    Attributes
    ----------
    trust_radius : float
        Å: the first trust radius, how far the walk on the model may go from the
        configurations computed.
    max_trust_radius : float
        Å: the largest the trust radius grows to.
    model_fmax : float or None
        eV/Å: the model's forces the walk converges to; None takes a fifth of the run's
        ``fmax``.
    model_steps : int
        Sella's steps per walk on the model at most.
    order_steps : int
        Steps a search may take off configurations whose forces are converged where
        the model has a second negative curvature that the prior or the calls support.
    mode_probes : int
        Calls at most that test the model's lowest mode at the start of a periodic
        system's search under a prior that is no calculator
        (:mod:`asebo.saddle.mode_probe`); 0 climbs it untested.
    probe_length : float
        Å: the largest atomic move of a probe along the mode.
    probe_overlap : float
        The absolute overlap of the model's lowest mode with the one probed last at
        which the test ends.
    crystal_images : bool
        Where the test ends on a mode that a map of the crystal carrying the start
        onto itself reverses, every fit from then on takes each configuration computed
        with its image under that map as a second observation, where the two are
        apart (:mod:`asebo.optimize.crystal_symmetry`); False fits the calls alone.
    newton_near : float
        Under a prior that is no calculator, where the largest force of the call last
        computed is below ``newton_near`` times ``fmax`` and the model's forces there
        were off by more than ``fmax``, the next call is the Newton step on the computed
        forces and the model's curvature (:func:`asebo.saddle.walk.newton_step`), not a
        walk on the model; 0 walks.
    walk : WalkTrustSettings
        How the trust radius follows the model's force error.
    """

    trust_radius: float = 0.1
    max_trust_radius: float = 0.5
    model_fmax: float | None = None
    model_steps: int = 300
    order_steps: int = 2
    mode_probes: int = 6
    probe_length: float = 0.05
    probe_overlap: float = 0.9
    crystal_images: bool = True
    newton_near: float = 2.0
    walk: WalkTrustSettings = WalkTrustSettings()


DRIVER_SETTINGS = {"band": BandSettings, "saddle": SaddleSettings}
"""The settings of the drivers beside :class:`asebo.BOOptimizer`'s, by the prefix the
table of settings gives their rows."""


def settings_table():
    """The Markdown table of every setting, as the documentation shows it.

    One row per field of the groups of :class:`Settings` and of
    :data:`DRIVER_SETTINGS`: its name as the optimizer's ``settings`` reads it
    (``search.kappa``, ``band.uncertainty``; a group within a group by its path,
    ``band.walk.good``), its default and the first sentence of its description in the
    group's docstring, the reStructuredText roles and literals turned into Markdown
    code.

    Returns
    -------
    str
        The table, its lines ending in a newline.
    """
    lines = ["| setting | default | what |", "|---|---|---|"]
    groups = [(group.name, type(_default(group))) for group in fields(Settings)]
    for prefix, kind in groups + list(DRIVER_SETTINGS.items()):
        lines.extend(_rows(prefix, kind))
    return "".join(line + "\n" for line in lines)


def _default(setting):
    """The default value of a dataclass field."""
    return setting.default_factory() if setting.default is MISSING else setting.default


def _rows(prefix, kind):
    """The table's rows of the settings group ``kind`` whose fields are read as
    ``prefix.name``; a field that is a group itself gives its own rows."""
    described = _described(kind)
    rows = []
    for setting in fields(kind):
        default = _default(setting)
        if is_dataclass(default):
            rows.extend(_rows(f"{prefix}.{setting.name}", type(default)))
            continue
        what = _markdown(_first_sentence(described[setting.name]))
        rows.append(f"| `{prefix}.{setting.name}` | `{default!r}` | {what} |")
    return rows


def _described(kind):
    """The description of each attribute of ``kind``'s numpydoc Attributes section,
    its lines joined; attributes named together share theirs."""
    lines = inspect.cleandoc(kind.__doc__).splitlines()
    described, names = {}, []
    for line in lines[lines.index("Attributes") + 2 :]:
        if line and not line.startswith(" "):
            names = [name.strip() for name in line.split(" : ")[0].split(",")]
            described.update({name: "" for name in names})
        elif line.strip():
            described.update({name: f"{described[name]} {line.strip()}".strip() for name in names})
    return described


def _first_sentence(text):
    """``text`` up to its first full stop followed by a capital or the end."""
    return re.match(r"(.+?\.)(?=\s+[A-Z]|$)", text).group(1)


def _markdown(text):
    """reStructuredText roles and double-backquoted literals as Markdown code; a ``|``
    escaped for a table cell."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


@dataclass(frozen=True)
class Rules:
    """Switches of the special-case rules of a step and of the check at convergence,
    each on by default; one turned off alone measures what its rule buys
    (``asebo bench ablation``).

    The rules that a setting already turns off have no switch here: the pessimistic
    bound from 90 coordinates (``SearchSettings(kappa=0.1)``), the rigid move's
    shrinking (``SpecialCases(rigid_shrink=1.0)``), the curvature steps at convergence
    (``SpecialCases(curvature_steps=0)``), the model's quadratic at convergence
    (``SpecialCases(quadratic_drop=None)``) and the symmetry probe (off unless
    ``SpecialCases.symmetry_probe`` is set). ``docs/notes/ablation-rules.md`` lists
    every rule and where it lives.

    Attributes
    ----------
    latest_start : bool
        Off: the search starts at the lowest configuration alone, not also at the
        latest one where that is another (:func:`asebo.optimize.stages.search_starts`).
    prior_failure_retry : bool
        Off: a prior calculator that fails during a search ends the step's searches, and
        the step goes along the forces, instead of the search being repeated in a box
        half the size (:func:`asebo.optimize.search.search`).
    uncertain_retry : bool
        Off: the model's drop to its proposal is not checked against its uncertainty
        (:func:`asebo.optimize.trust.check_confident`), so no search is repeated in a
        box half the size, nor in a box sized by the slope's noise.
    slope_noise_box : bool
        Off: a drop in doubt at every length down to the smallest box halves the box as
        any other doubt does, instead of repeating the search once in a box the size of
        the length where the drop is surest (:class:`asebo.optimize.trust.SlopeNoiseError`).
    overturned_curvature : bool
        Off: a step along which only the GP's interpolation curves down is not refused
        (:func:`asebo.optimize.trust.check_curvature_supported`); nor is the search
        repeated with the prior's curvature along it.
    interpolated_modes : bool
        Off: under a model prior the first overturned refusal of a step corrects the
        refused step alone, as under a prior calculator, not every mode of the model's
        Hessian along which only the interpolation curves down
        (:func:`asebo.optimize.model_hessian.interpolated_descents`).
    segment_restart : bool
        Off: the search repeated after an overturned refusal starts where the refused
        search ended, not at the lowest corrected bound on the line to it
        (:func:`asebo.optimize.search.lowest_on_segment`).
    line_start : bool
        Off: under a prior calculator a search starts where it is told, clipped onto
        its box's faces where it lies beyond them, not moved towards the box's centre
        on the straight line into the box (:func:`asebo.optimize.search.drawn_into_box`);
        a search repeated in a smaller box starts where the one before ended.
    force_step_halving : bool
        Off: a step along the forces tries its one length only, not halved down to 2^-39
        of it: where that leads to a configuration computed, the run stops without
        progress (:func:`asebo.optimize.stages.force_step`).
    newton_force_step : bool
        Off: where the model's minimum along the forces lies closer than the trust
        region's floor, the step along the forces is still one of the lengths of the
        trust region, not the model's Newton step (:func:`asebo.optimize.stages.newton_step`).
    force_step_radius : bool
        Off: a step along the forces keeps the trust radius its searches left, down to
        the floor, instead of widening it to ``TrustSettings.force_step``
        (:meth:`asebo.optimize.trust.TrustRegion.for_force_step`).
    rigid_move : bool
        Off: where only the net force and torque keep the lowest configuration from
        converging, the model's proposal stands without a rigid move along them (stage
        ``'rigid_move'``, :func:`asebo.optimize.stages.move_rigidly`).
    curvature_evidence : bool
        Off: at converged forces a curvature step follows every negative curvature the
        model resolves beyond its doubt, not only one that a configuration computed or
        a prior calculator also says leads down
        (:func:`asebo.optimize.model_hessian.evidence_of_descent`).
    quadratic_patience : bool
        Off: the model's quadratic keeps a run with converged forces going however many
        calls in a row find nothing lower, not only for ``QUADRATIC_PATIENCE`` (3) of
        them (:data:`asebo.optimize.endpoint.QUADRATIC_PATIENCE`).
    """

    latest_start: bool = True
    prior_failure_retry: bool = True
    uncertain_retry: bool = True
    slope_noise_box: bool = True
    overturned_curvature: bool = True
    interpolated_modes: bool = True
    segment_restart: bool = True
    line_start: bool = True
    force_step_halving: bool = True
    newton_force_step: bool = True
    force_step_radius: bool = True
    rigid_move: bool = True
    curvature_evidence: bool = True
    quadratic_patience: bool = True
