"""Each switch of Rules turns its rule off alone: the rule fires with it on, not with it off."""

import io
from dataclasses import replace

import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.io import read
from ase.optimize import BFGS

import asebo.optimize.endpoint as endpoint_module
import asebo.optimize.search as search_module
import asebo.optimize.stages as stages_module
from asebo import BOOptimizer
from asebo.benchmarks import baker
from asebo.model.priors import PriorCalculationError
from asebo.optimize.preconditioning import INSIDE
from asebo.optimize.proposal import RIGID_MOVE, SEARCH_FAILED
from asebo.optimize.search import drawn_into_box
from asebo.optimize.settings import Rules, Settings, SpecialCases
from asebo.optimize.stages import NoProgressError, force_step, search_starts, step_along_forces
from asebo.optimize.trust import OverturnedCurvatureError, SlopeNoiseError, UncertainStepError
from calculators import get_calculator

DATA_DIR = baker.DEFAULT_DIR.parent


def with_rules(context, **switches):
    """``context`` with the rules of ``switches`` (name=False) turned off."""
    return replace(context, settings=replace(context.settings, rules=Rules(**switches)))


def water_context():
    """The step context of rattled water after two steps under EMT."""
    atoms = molecule("H2O")
    atoms.positions += 0.1 * np.random.default_rng(3).normal(size=(3, 3))
    atoms.calc = EMT()
    opt = BOOptimizer(atoms, logfile=None)
    opt.run(fmax=1e-6, steps=2)
    return opt.engine.step_context(opt.observations, opt.trust, opt.fmax)


def argon_context():
    """The step context of an LJ argon cluster after one step, under a constant prior."""
    atoms = Atoms("Ar4", positions=[[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]])
    atoms.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=4.0)
    opt = BOOptimizer(atoms, logfile=None, prior="max", trust_radius=0.05)
    opt.run(fmax=0.01, steps=1)
    return replace(
        opt.engine.step_context(opt.observations, opt.trust, opt.fmax), best=0
    ), opt.observations


def searched(context):
    """The search of ``context`` from its own starts."""
    return search_module.search(context, search_starts(context))


def refusing(error, times=1):
    """A check that raises ``error()`` the first ``times`` times it is called."""
    calls = []

    def check(*args, **options):
        calls.append(args)
        if len(calls) <= times:
            raise error()

    return check


def overturned():
    return OverturnedCurvatureError("curves down", np.eye(9)[0], 1.0)


def test_every_rule_is_on_by_default_and_settings_hold_them():
    assert Settings().rules == Rules()
    assert all(vars(Rules()).values())
    atoms = molecule("H2O")
    atoms.calc = EMT()
    chosen = Rules(rigid_move=False)
    assert BOOptimizer(atoms, logfile=None, rules=chosen).settings.rules is chosen
    assert BOOptimizer(atoms, logfile=None).settings.rules == Rules()


def test_the_search_from_the_latest_configuration_turns_off():
    context = replace(water_context(), best=0)  # the latest is another configuration
    starts = search_starts(context)
    assert len(starts) == 2
    np.testing.assert_array_equal(starts[1], context.observations.positions[-1])
    starts_off = search_starts(with_rules(context, latest_start=False))
    assert len(starts_off) == 1


def test_the_retry_after_a_prior_calculator_fails_turns_off(monkeypatch):
    def failing(*args, **options):
        raise PriorCalculationError("the prior calculator failed: SCF not converged")

    monkeypatch.setattr(search_module, "minimize_lcb", failing)
    context = water_context()
    retries = context.settings.search.retries
    on = searched(context)
    assert on.reason == SEARCH_FAILED and on.retried == ("prior_failed",) * (retries + 1)
    assert on.trust.radius < context.trust.radius  # halved at each failure
    off = searched(with_rules(context, prior_failure_retry=False))
    assert off.reason == SEARCH_FAILED and off.retried == ("prior_failed",)
    assert off.trust.radius == context.trust.radius


def test_the_retry_after_an_uncertain_drop_turns_off(monkeypatch):
    context = water_context()
    monkeypatch.setattr(search_module, "check_confident", refusing(UncertainStepError))
    assert searched(context).retried[0] == "uncertain"
    monkeypatch.setattr(search_module, "check_confident", refusing(UncertainStepError))
    assert "uncertain" not in searched(with_rules(context, uncertain_retry=False)).retried


def test_the_box_sized_by_the_slope_noise_turns_off(monkeypatch):
    def check(gp, centre, proposal, confidence, shortest=None):
        if shortest is None:  # the proposal alone: a doubt any box may remove
            raise UncertainStepError("in doubt")
        raise SlopeNoiseError("in doubt down to the floor", 0.01)

    monkeypatch.setattr(search_module, "check_confident", check)
    context = water_context()
    assert searched(context).retried == ("slope_noise",)
    assert searched(with_rules(context, slope_noise_box=False)).retried[0] == "uncertain"


def test_the_refusal_of_an_overturned_curvature_turns_off(monkeypatch):
    context = water_context()
    monkeypatch.setattr(search_module, "check_curvature_supported", refusing(overturned))
    assert searched(context).retried[0] == "overturned"
    monkeypatch.setattr(search_module, "check_curvature_supported", refusing(overturned))
    assert "overturned" not in searched(with_rules(context, overturned_curvature=False)).retried


@pytest.mark.parametrize("rule", ["interpolated_modes", "segment_restart"])
def test_the_corrected_modes_and_the_segment_restart_turn_off(monkeypatch, rule):
    calls = {"interpolated_descents": 0, "lowest_on_segment": 0}

    def counted(name):
        original = getattr(search_module, name)

        def wrapper(*args, **options):
            calls[name] += 1
            return original(*args, **options)

        return wrapper

    for name in calls:
        monkeypatch.setattr(search_module, name, counted(name))
    context = water_context()
    monkeypatch.setattr(search_module, "check_curvature_supported", refusing(overturned))
    searched(context)
    assert calls == {"interpolated_descents": 1, "lowest_on_segment": 1}
    monkeypatch.setattr(search_module, "check_curvature_supported", refusing(overturned))
    searched(with_rules(context, **{rule: False}))
    called = {"interpolated_modes": "interpolated_descents", "segment_restart": "lowest_on_segment"}
    assert calls[called[rule]] == 1 and calls[next(n for n in calls if n != called[rule])] == 2


def test_a_repeated_search_under_a_prior_calculator_starts_on_the_line_into_its_box(monkeypatch):
    atoms = molecule("H2O")
    atoms.positions += 0.1 * np.random.default_rng(3).normal(size=(3, 3))
    atoms.calc = get_calculator("gfn2")
    opt = BOOptimizer(atoms, logfile=None, prior=get_calculator("gfn1"))
    opt.run(fmax=1e-6, steps=0)  # the first call alone: the search runs to the box's faces
    context = opt.engine.step_context(opt.observations, opt.trust, opt.fmax)
    original, seen = search_module.minimize_lcb, []

    def recorded(gp, starts, centre, radius, *args, **options):
        found = original(gp, starts, centre, radius, *args, **options)
        seen.append((starts[0].numpy(), radius, found[0].numpy()))
        return found

    monkeypatch.setattr(search_module, "minimize_lcb", recorded)
    monkeypatch.setattr(search_module, "check_confident", refusing(UncertainStepError))
    searched(context)
    (_, first_radius, first_end), (start, radius, _) = seen[:2]
    centre = context.centre
    assert radius == first_radius / 2
    assert np.abs(first_end - centre).max() > radius  # it ended beyond the halved box
    np.testing.assert_allclose(np.abs(start - centre).max(), INSIDE * radius)
    along, drawn = (first_end - centre).ravel(), (start - centre).ravel()
    np.testing.assert_allclose(drawn, along * (drawn[0] / along[0]))  # the same direction
    seen.clear()
    monkeypatch.setattr(search_module, "check_confident", refusing(UncertainStepError))
    searched(with_rules(context, line_start=False))
    np.testing.assert_array_equal(seen[1][0], seen[0][2])  # where the first search ended


def test_a_start_beyond_the_box_is_drawn_in_along_the_line_and_one_inside_stays():
    centre = np.zeros((2, 3))
    start = np.array([[0.3, -0.1, 0.0], [0.05, 0.2, -0.4]])
    drawn = drawn_into_box(centre, start, 0.1)
    np.testing.assert_allclose(drawn, start * (INSIDE * 0.1 / 0.4))
    inside = 0.5 * drawn
    assert drawn_into_box(centre, inside, 0.1) is inside


def test_the_halved_step_along_the_forces_turns_off():
    context, observations = argon_context()
    centre, forces = context.centre, observations.forces[0]
    direction = forces / np.linalg.norm(forces, axis=1).max()
    observations.append(centre + 0.05 * direction, 0.0, np.zeros((4, 3)))  # computed
    np.testing.assert_allclose(force_step(context, 0.05), centre + 0.025 * direction, atol=1e-12)
    with pytest.raises(NoProgressError):
        force_step(with_rules(context, force_step_halving=False), 0.05)


def test_the_newton_step_along_the_forces_turns_off(monkeypatch):
    context, observations = argon_context()
    newton = 1e-4 * np.ones((4, 3))
    monkeypatch.setattr(stages_module, "newton_length", lambda *args: 1e-4)  # below the floor
    monkeypatch.setattr(stages_module, "newton_step", lambda *args: newton)
    np.testing.assert_array_equal(force_step(context, 0.05), context.centre + newton)
    step = force_step(with_rules(context, newton_force_step=False), 0.05) - context.centre
    assert np.linalg.norm(step, axis=1).max() == pytest.approx(0.05)


def test_the_widened_trust_radius_of_a_step_along_the_forces_turns_off():
    context, _ = argon_context()
    proposal = searched(context)
    failed = replace(proposal, positions=None, trust=proposal.trust.within(1e-3))
    on = step_along_forces(context, failed)
    assert on.trust.radius == context.settings.trust_region.force_step
    off = step_along_forces(with_rules(context, force_step_radius=False), failed)
    assert off.trust.radius == 1e-3
    step = np.linalg.norm(off.positions - context.centre, axis=1).max()
    assert step == pytest.approx(1e-3)


class FieldEMT(Calculator):
    """EMT in a uniform field along x: forces with a net part no change of shape removes."""

    implemented_properties = ("energy", "forces")

    def __init__(self, field):
        super().__init__()
        self.field = field

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        inner = self.atoms.copy()
        inner.calc = EMT()
        self.results = {
            "energy": inner.get_potential_energy() - self.field * self.atoms.positions[:, 0].sum(),
            "forces": inner.get_forces() + [self.field, 0.0, 0.0],
        }


def test_the_rigid_move_turns_off():
    def reasons(rules):
        atoms = molecule("H2O")
        atoms.calc = EMT()
        BFGS(atoms, logfile=None).run(fmax=1e-4)
        atoms.calc = FieldEMT(0.05)
        opt = BOOptimizer(atoms, logfile=None, rules=rules)
        opt.run(fmax=0.03, steps=1)  # the shape's forces meet it, the net force not
        return opt.reasons

    assert reasons(Rules()) == [RIGID_MOVE]
    assert RIGID_MOVE not in reasons(Rules(rigid_move=False))


def methane_dimer():
    atoms = read(DATA_DIR / "s22" / "Methane_dimer.xyz")
    atoms.calc = get_calculator("gfn2")
    return atoms


def test_curvature_steps_without_evidence_turn_on_with_the_evidence_rule_off():
    """The methane dimer converges where only the GP's interpolation curves down: with
    the evidence asked for, no step follows that curvature; without, one does."""
    on = BOOptimizer(methane_dimer(), logfile=None)
    assert on.run(fmax=0.05) and "curvature" not in on.reasons
    off = BOOptimizer(methane_dimer(), logfile=None, rules=Rules(curvature_evidence=False))
    off.run(fmax=0.05)
    assert "curvature" in off.reasons


def test_the_quadratics_patience_turns_off(monkeypatch):
    """With no patience left (0 calls), the model's quadratic keeps no run going; with
    the rule off it does, as it does with the default patience."""
    monkeypatch.setattr(endpoint_module, "QUADRATIC_PATIENCE", 0)
    settings = SpecialCases(quadratic_drop=1e-3)
    logs = {}
    for rules in (Rules(), Rules(quadratic_patience=False)):
        atoms = molecule("CH3CH2OH")
        atoms.rattle(0.05, seed=3)
        atoms.calc = get_calculator("gfn2")
        log = io.StringIO()
        opt = BOOptimizer(atoms, logfile=log, special_cases=settings, rules=rules)
        opt.run(fmax=0.3, steps=60)
        logs[rules.quadratic_patience] = log.getvalue()
    assert "quadratic puts its minimum" not in logs[True]
    assert "quadratic puts its minimum" in logs[False]


@pytest.mark.parametrize("length", [0.5887257382671136, 0.3, 0.05, 0.0201, 0.02, 0.01, 0.0])
def test_the_fractions_of_a_checked_step_halve_down_to_the_shortest_and_stop(length):
    """A step of 0.5887... Å against a floor of 0.02 Å: ``(0.02 / length) * length``
    rounds above 0.02, which once kept the halving appending the last fraction until the
    memory ran out."""
    from asebo.optimize.trust import step_fractions

    fractions = step_fractions(length, 0.02)
    assert fractions[0] == 1.0
    assert all(b == max(a / 2, 0.02 / length) for a, b in zip(fractions, fractions[1:]))
    assert fractions[-1] * length == pytest.approx(min(0.02, length))
    assert len(fractions) <= 2 + np.log2(max(length / 0.02, 1.0))
    assert step_fractions(length, None) == [1.0]
