"""The one resolution of the settings of :class:`asebo.BOOptimizer`.

:func:`resolve_settings` turns the optimizer's arguments into the one frozen
:class:`asebo.optimize.settings.Settings` that the GP, the search, the trust region
and the special cases read. The arguments ``kappa``, ``maxstep``, ``trust_radius``,
``recentre`` and ``gp_options`` are shortcuts that write into the fields of
:data:`SHORTCUTS`; a value given both ways must agree. A field left at its default
is resolved for the representation, the prior and the number of free coordinates:
no field the optimizer reads stays None but those whose None is a choice
(:class:`asebo.optimize.settings.Settings`).
"""

import inspect
from dataclasses import replace

import numpy as np

from asebo.model.gp import EnergyForceGP
from asebo.optimize.settings import (
    ModelSettings,
    Rules,
    SearchSettings,
    Settings,
    SpecialCases,
    TrustSettings,
)

SHORTCUTS = {
    "kappa": "search.kappa",
    "maxstep": "trust_region.maxstep",
    "trust_radius": "trust_region.radius",
    "recentre": "model.recentre",
    "gp_options['trend']": "model.trend",
    "gp_options['prior_curvature']": "model.prior_curvature",
    "gp_options": "model.gp_options",
}
"""Each argument of :class:`asebo.BOOptimizer` that is a shortcut, and the field of
:class:`asebo.optimize.settings.Settings` it writes into."""
MIRRORED = ("trend", "prior_curvature")
"""The options of :class:`asebo.model.gp.EnergyForceGP` that are fields of
:class:`asebo.optimize.settings.ModelSettings` of their own."""


def resolve_settings(
    representation,
    prior_calculator,
    free_coordinates,
    *,
    kappa=None,
    maxstep=None,
    trust_radius=None,
    recentre=None,
    gp_options=None,
    search=None,
    trust_region=None,
    model=None,
    special_cases=None,
    rules=None,
):
    """The settings of an optimizer, every value resolved.

    Parameters
    ----------
    representation : asebo.optimize.representations.Representation
        Its defaults stand for ``model.trend`` and ``model.recentre`` left None.
    prior_calculator : bool
        Whether the prior is a second calculator, which has defaults of its own.
    free_coordinates : int
        The coordinates the search moves: they choose the default ``kappa``.
    kappa, maxstep, trust_radius, recentre, gp_options : optional
        The optimizer's shortcuts (:data:`SHORTCUTS`).
    search, trust_region, model, special_cases, rules : optional
        The optimizer's settings; None takes the defaults.

    Returns
    -------
    asebo.optimize.settings.Settings

    Raises
    ------
    ValueError
        For a shortcut and a field that disagree (naming both), a ``gp_options`` name
        the GP does not take or one of :data:`MIRRORED`, a value out of range.
    TypeError
        For ``kappa``, ``maxstep`` or ``trust_radius`` that is no number.
    """
    return Settings(
        _resolved_search(search, kappa, free_coordinates, prior_calculator),
        _resolved_trust(trust_region, maxstep, trust_radius, prior_calculator),
        _resolved_model(model, gp_options, recentre, representation, prior_calculator),
        SpecialCases() if special_cases is None else special_cases,
        Rules() if rules is None else rules,
    )


def _resolved_search(search, kappa, free_coordinates, prior_calculator):
    """``search`` (None: the defaults) with ``kappa`` resolved from the shortcut and
    the default for ``free_coordinates`` with or without a prior calculator."""
    search = SearchSettings() if search is None else search
    kappa = _agreed("kappa", kappa, "search.kappa", search.kappa)
    default_kappa = search.kappa_for(free_coordinates, prior_calculator)
    return replace(search, kappa=finite_number("kappa", kappa, default_kappa))


def _resolved_trust(trust_region, maxstep, trust_radius, prior_calculator):
    """``trust_region`` (None: the defaults) with ``maxstep`` and ``radius`` resolved
    from the shortcuts and the defaults with or without a prior calculator."""
    trust_region = TrustSettings() if trust_region is None else trust_region
    maxstep = _agreed("maxstep", maxstep, "trust_region.maxstep", trust_region.maxstep)
    radius = _agreed("trust_radius", trust_radius, "trust_region.radius", trust_region.radius)
    longest, first = (
        (trust_region.calculator_maxstep, trust_region.calculator_radius)
        if prior_calculator
        else (trust_region.default_maxstep, trust_region.default_radius)
    )
    return replace(
        trust_region,
        maxstep=positive_number("maxstep", maxstep, longest),
        radius=positive_number("trust_radius", radius, first),
    )


def _resolved_model(model, gp_options, recentre, representation, prior_calculator):
    """``model`` (None: the defaults) with the GP's options, ``trend``,
    ``prior_curvature`` and ``recentre`` resolved from the shortcuts and the
    representation's defaults."""
    model = ModelSettings() if model is None else model
    options = _gp_options(gp_options, model.gp_options)
    given = {name: options.pop(name) for name in MIRRORED if name in options}
    trend = _agreed("gp_options['trend']", given.get("trend"), "model.trend", model.trend)
    curvature = _agreed(
        "gp_options['prior_curvature']",
        given.get("prior_curvature"),
        "model.prior_curvature",
        model.prior_curvature,
        ModelSettings.prior_curvature,
    )
    return replace(
        model,
        trend=representation.default_trend if trend is None else trend,
        prior_curvature=curvature if "prior_curvature" in given or prior_calculator else 0.0,
        recentre=resolve_recentre(recentre, model, representation),
        gp_options=options,
    )


WALK_SHORTCUTS = {
    "trust_radius": "trust_radius",
    "max_trust_radius": "max_trust_radius",
    "maxstep": "max_trust_radius",
    "uncertainty": "uncertainty",
    "model_fmax": "model_fmax",
    "model_steps": "model_steps",
}
"""Each argument of :class:`asebo.neb.BONEB` and :class:`asebo.saddle.BOSaddle` that is
a shortcut, and the field of :class:`asebo.optimize.settings.BandSettings` or
:class:`asebo.optimize.settings.SaddleSettings` it writes into (``maxstep`` is ASE's
name of the largest step; ``uncertainty`` is the band's alone)."""


def resolve_walk_settings(kind, settings=None, **shortcuts):
    """The settings of a band or a saddle search, every value checked.

    Parameters
    ----------
    kind : type
        :class:`asebo.optimize.settings.BandSettings` or
        :class:`asebo.optimize.settings.SaddleSettings`.
    settings : kind, optional
        None takes the defaults.
    **shortcuts
        The driver's arguments of :data:`WALK_SHORTCUTS`, None where not given; a value
        given both ways must be the same.

    Returns
    -------
    kind
        Its first trust radius no larger than its largest.

    Raises
    ------
    ValueError
        For a shortcut and a field that disagree (naming both), a value out of range.
    TypeError
        For a value that is no number.
    """
    settings = kind() if settings is None else settings
    defaults, given = kind(), {}
    for argument, value in shortcuts.items():
        name = WALK_SHORTCUTS[argument]
        field_value = given.get(name, getattr(settings, name))
        default = getattr(defaults, name)
        given[name] = _agreed(argument, value, f"settings.{name}", field_value, default)
    settings = replace(settings, **given)
    largest = positive_number("max_trust_radius", settings.max_trust_radius, None)
    steps = settings.model_steps
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"model_steps must be a whole number >= 1, got {steps!r}")
    model_fmax = settings.model_fmax
    checked = {
        "trust_radius": min(positive_number("trust_radius", settings.trust_radius, None), largest),
        "max_trust_radius": largest,
        "model_fmax": None
        if model_fmax is None
        else positive_number("model_fmax", model_fmax, None),
    }
    if hasattr(settings, "uncertainty"):
        checked["uncertainty"] = positive_number("uncertainty", settings.uncertainty, None)
    return replace(settings, **checked)


def resolve_recentre(recentre, model, representation):
    """The recentring of the Lindh prior or the pair springs, eV: ``recentre``, the
    argument, or ``model.recentre`` (which must agree where both are given), else the
    representation's default.

    The prior is built with it before :func:`resolve_settings` can be called (which
    needs to know whether the prior is a calculator); :func:`resolve_settings` resolves
    it here too.
    """
    recentre = _agreed("recentre", recentre, "model.recentre", model.recentre)
    recentre = representation.default_recentre if recentre is None else recentre
    if not (isinstance(recentre, (int, float)) and recentre >= 0):
        raise ValueError(f"recentre must be an energy >= 0 in eV (inf: never), got {recentre!r}")
    return recentre


def finite_number(name, value, default):
    """``value`` (``default`` when None) as a finite float, of either sign."""
    value = _as_float(name, value, default)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def positive_number(name, value, default):
    """``value`` (``default`` when None) as a finite float > 0."""
    value = _as_float(name, value, default)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def _as_float(name, value, default):
    """``value`` (``default`` when None) as a float; a TypeError for what is no number."""
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


def _agreed(argument, value, setting, field_value, default=None):
    """The value given as the shortcut ``argument``, else the field ``setting``'s
    ``field_value``; where the field is given too (not at its ``default``), they must
    be the same (:func:`_disagreement`)."""
    if value is None:
        return field_value
    if field_value != default and not _same(value, field_value):
        raise _disagreement(argument, value, setting, field_value)
    return value


def _disagreement(first, first_value, second, second_value):
    """The ValueError of one setting given two ways that differ, naming both."""
    return ValueError(
        f"{first}={first_value!r} and {second}={second_value!r} disagree: they are one "
        "setting; give one of them, or the same value to both"
    )


def _gp_options(gp_options, settings_options):
    """The argument ``gp_options`` and the field ``model.gp_options`` in one dict.

    Raises
    ------
    ValueError
        For a name :class:`asebo.model.gp.EnergyForceGP` does not take (``prior`` is the
        optimizer's), one of :data:`MIRRORED` in the field (a field of its own), or a
        name given both ways with values that differ.
    """
    accepted = set(inspect.signature(EnergyForceGP).parameters) - {"prior"}
    options = dict(gp_options or {})
    for where, given in (("gp_options", options), ("model.gp_options", settings_options)):
        unknown = sorted(set(given) - accepted)
        if unknown:
            hint = " (pass prior= to BOOptimizer)" if "prior" in unknown else ""
            raise ValueError(
                f"{where}: {', '.join(map(repr, unknown))} not an option of EnergyForceGP"
                f"{hint}; its options are {', '.join(sorted(accepted))}"
            )
    for name in MIRRORED:
        if name in settings_options:
            raise ValueError(
                f"model.gp_options[{name!r}]: it is model.{name}, a field of its own; set that"
            )
    for name, value in settings_options.items():
        if name in options and not _same(options[name], value):
            argument, setting = f"gp_options[{name!r}]", f"model.gp_options[{name!r}]"
            raise _disagreement(argument, options[name], setting, value)
        options.setdefault(name, value)
    return options


def _same(first, second):
    """Whether two values given for one setting are the same: equal, or one object."""
    if first is second:
        return True
    try:
        return bool(first == second)
    except (TypeError, ValueError):  # arrays and the like, compared elementwise
        return False
