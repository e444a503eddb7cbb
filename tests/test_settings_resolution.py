"""One home for every setting: the optimizer's ``settings`` is what its parts use.

Sets every knob both ways, as an argument of the optimizer and as a field of the
settings, and checks that what ``opt.settings`` says is what the GP, the search, the
trust region and the prior use; a value given both ways must agree. The table of
settings in docs/using.md is the one the dataclasses generate.
"""

import inspect
import runpy
from pathlib import Path

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.cluster import Icosahedron

import asebo.optimize.search as search_module
from asebo import BOOptimizer
from asebo.model.gp import EnergyForceGP
from asebo.optimize.resolve import SHORTCUTS
from asebo.optimize.settings import (
    ModelSettings,
    SearchSettings,
    SpecialCases,
    TrustSettings,
)

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "settings_table.py"
GAMMA = inspect.signature(EnergyForceGP).parameters["gamma"].default


def copper_cluster():
    """13 copper atoms rattled off the icosahedron under EMT: the internal-coordinate
    kernel, whose default trend is 30."""
    atoms = Icosahedron("Cu", 2)
    atoms.center(vacuum=5.0)
    atoms.rattle(0.05, seed=1)
    atoms.calc = EMT()
    return atoms


def lennard_jones():
    """A prior calculator for the copper cluster."""
    return LennardJones(sigma=2.3, epsilon=0.4, rc=6.0)


# each shortcut: the argument, the same value as the field it writes into, the
# options both ways share, and the value the field holds
KNOBS = {
    "kappa": ({"kappa": 0.7}, {"search": SearchSettings(kappa=0.7)}, {}, 0.7),
    "maxstep": ({"maxstep": 0.15}, {"trust_region": TrustSettings(maxstep=0.15)}, {}, 0.15),
    "trust_radius": (
        {"trust_radius": 0.05},
        {"trust_region": TrustSettings(radius=0.05)},
        {},
        0.05,
    ),
    "recentre": ({"recentre": 1.0}, {"model": ModelSettings(recentre=1.0)}, {}, 1.0),
    "gp_options['trend']": (
        {"gp_options": {"trend": 0.0}},
        {"model": ModelSettings(trend=0.0)},
        {},
        0.0,
    ),
    "gp_options['prior_curvature']": (
        {"gp_options": {"prior_curvature": 0.5}},
        {"model": ModelSettings(prior_curvature=0.5)},
        {"prior": lennard_jones()},
        0.5,
    ),
    "gp_options": (
        {"gp_options": {"gamma": 3.0}},
        {"model": ModelSettings(gp_options={"gamma": 3.0})},
        {},
        {"gamma": 3.0},
    ),
}


def used(monkeypatch, **options):
    """The optimizer of the copper cluster after one step, and what its parts used:
    the GP built, the trust region and prior at the start, the first search's kappa
    and box and the ``maxstep`` its step is cut to."""
    searched, cut = [], []
    minimize, within = search_module.minimize_lcb, search_module.within_maxstep

    def recorded_minimize(gp, starts, centre, radius, free, kappa, *args, **more):
        searched.append((kappa, radius))
        return minimize(gp, starts, centre, radius, free, kappa, *args, **more)

    def recorded_within(centre, proposal, maxstep):
        cut.append(maxstep)
        return within(centre, proposal, maxstep)

    monkeypatch.setattr(search_module, "minimize_lcb", recorded_minimize)
    monkeypatch.setattr(search_module, "within_maxstep", recorded_within)
    opt = BOOptimizer(copper_cluster(), logfile=None, **options)
    gp = opt.gp
    parts = {
        "gp": (gp.trend, gp.prior_curvature, gp.gamma),
        "trust": (opt.trust.radius, opt.trust.maxstep, opt.trust.settings),
        "recentre": opt.prior.recentre if hasattr(opt.prior, "recentre") else None,
    }
    opt.run(fmax=1e-6, steps=1)
    parts["search"] = searched[0]
    parts["maxstep"] = cut[0]
    return opt, parts


def check_read(opt, parts):
    """What the parts used is what ``opt.settings`` says."""
    settings = opt.settings
    model = settings.model
    assert parts["gp"] == (model.trend, model.prior_curvature, model.gp_options.get("gamma", GAMMA))
    radius, maxstep, trust = parts["trust"]
    assert (radius, maxstep) == (settings.trust_region.radius, settings.trust_region.maxstep)
    assert trust == settings.trust_region
    assert parts["search"] == (settings.search.kappa, settings.trust_region.radius)
    assert parts["maxstep"] == settings.trust_region.maxstep
    if parts["recentre"] is not None:
        assert parts["recentre"] == model.recentre
    assert (opt.kappa, opt.maxstep, opt.initial_trust_radius, opt.recentre) == (
        settings.search.kappa,
        settings.trust_region.maxstep,
        settings.trust_region.radius,
        model.recentre,
    )


def test_every_shortcut_is_set_both_ways_below():
    assert sorted(KNOBS) == sorted(SHORTCUTS)


@pytest.mark.parametrize("knob", sorted(KNOBS))
def test_every_knob_set_both_ways_is_one_setting_that_every_part_reads(monkeypatch, knob):
    argument, field, shared, value = KNOBS[knob]
    by_argument, parts = used(monkeypatch, **argument, **shared)
    by_field, field_parts = used(monkeypatch, **field, **shared)
    group, name = SHORTCUTS[knob].split(".")
    assert getattr(getattr(by_argument.settings, group), name) == value
    assert by_argument.settings == by_field.settings
    check_read(by_argument, parts)
    check_read(by_field, field_parts)
    np.testing.assert_array_equal(by_argument.positions_seen, by_field.positions_seen)
    # both ways at once, agreeing, is the same again
    both, both_parts = used(monkeypatch, **argument, **field, **shared)
    assert both.settings == by_argument.settings
    check_read(both, both_parts)


def test_the_defaults_are_resolved_for_the_prior_and_every_part_reads_them(monkeypatch):
    for options in ({}, {"prior": lennard_jones()}):
        opt, parts = used(monkeypatch, **options)
        check_read(opt, parts)
        calculator = "prior" in options
        trust = TrustSettings()
        assert opt.settings.trust_region.maxstep == (
            trust.calculator_maxstep if calculator else trust.default_maxstep
        )
        assert opt.settings.search.kappa == SearchSettings().optimistic_kappa  # 39 coordinates
        assert opt.settings.model.trend == opt.representation.default_trend == 30.0
        assert opt.settings.model.prior_curvature == (1.0 if calculator else 0.0)
        assert opt.settings.special_cases == SpecialCases()


def test_a_trend_given_in_gp_options_is_the_trend_the_settings_say():
    opt = BOOptimizer(copper_cluster(), logfile=None, gp_options={"trend": 0.0})
    assert opt.representation.default_trend == 30.0
    assert opt.settings.model.trend == opt.gp.trend == 0.0
    assert "trend" not in opt.settings.model.gp_options


@pytest.mark.parametrize(
    "options, match",
    [
        ({"kappa": 0.5, "search": SearchSettings(kappa=0.2)}, "kappa=0.5 and search.kappa=0.2"),
        (
            {"maxstep": 0.3, "trust_region": TrustSettings(maxstep=0.2)},
            "maxstep=0.3 and trust_region.maxstep=0.2",
        ),
        (
            {"trust_radius": 0.05, "trust_region": TrustSettings(radius=0.1)},
            "trust_radius=0.05 and trust_region.radius=0.1",
        ),
        (
            {"recentre": 1.0, "model": ModelSettings(recentre=2.0)},
            "recentre=1.0 and model.recentre=2.0",
        ),
        (
            {"gp_options": {"trend": 0.0}, "model": ModelSettings(trend=5.0)},
            r"gp_options\['trend'\]=0.0 and model.trend=5.0",
        ),
        (
            {"gp_options": {"prior_curvature": 0.5}, "model": ModelSettings(prior_curvature=2.0)},
            r"gp_options\['prior_curvature'\]=0.5 and model.prior_curvature=2.0",
        ),
        (
            {"gp_options": {"gamma": 3.0}, "model": ModelSettings(gp_options={"gamma": 4.0})},
            r"gp_options\['gamma'\]=3.0 and model.gp_options\['gamma'\]=4.0",
        ),
        ({"model": ModelSettings(gp_options={"trend": 1.0})}, "a field of its own"),
        ({"model": ModelSettings(gp_options={"noise": 1.0})}, "'noise' not an option"),
    ],
)
def test_a_setting_given_two_ways_that_disagree_is_refused_naming_both(options, match):
    with pytest.raises(ValueError, match=match):
        BOOptimizer(copper_cluster(), logfile=None, **options)


def test_the_shortcuts_are_read_only():
    opt = BOOptimizer(copper_cluster(), logfile=None)
    for name in ("kappa", "maxstep", "initial_trust_radius", "recentre"):
        with pytest.raises(AttributeError):
            setattr(opt, name, 1.0)


def test_the_table_of_settings_in_the_docs_is_the_generated_one():
    script = runpy.run_path(str(SCRIPT))
    text = script["USING"].read_text(encoding="utf-8")
    assert script["updated"](text) == text, "run python scripts/settings_table.py"
