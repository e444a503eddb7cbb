"""BOSaddle's record of where it ended: converged only at a first-order saddle point by
the model, never at a minimum or at a saddle point of higher order; a walk on the model
that fails is a shorter walk, never the caller's exception."""

import io

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.optimize import BFGS

from asebo.benchmarks._endpoint_audit import imaginary_modes
from asebo.benchmarks.ts import guess
from asebo.optimize.model_calculators import ModelCalculator
from asebo.saddle import BOSaddle
from asebo.saddle.model_search import saddle_on_model
from asebo.saddle.result import FIRST_ORDER, HIGHER_ORDER, MINIMUM, STEPS, SaddleResult
from calculators import CountingCalculator, get_calculator

pytest.importorskip("sella")


def water_at_its_minimum():
    """GFN2-xTB's water relaxed to 0.01 eV/Å, with a counted GFN2-xTB."""
    atoms = molecule("H2O")
    atoms.calc = get_calculator("gfn2")
    BFGS(atoms, logfile=None).run(fmax=0.01)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    return atoms


def test_a_guess_at_a_minimum_ends_at_once_not_converged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atoms = water_at_its_minimum()
    with BOSaddle(atoms, restart="saddle.json", logfile=None) as search:
        assert not search.run(fmax=0.05)
        assert search.nsteps == 0 and atoms.calc.ncalls == 1
        assert search.result == SaddleResult(False, True, 0, None, MINIMUM)
    again = water_at_its_minimum()
    with BOSaddle(again, restart="saddle.json", logfile=None) as search:
        assert not search.run(fmax=0.05)  # resumed: no call, the same end
        assert search.result.reason == MINIMUM
    assert again.calc.ncalls == 0


def test_a_second_order_saddle_point_with_no_step_left_is_not_converged():
    # rattled water walks to linear water, whose bend is doubly degenerate: two steps
    # along the second negative curvature come back there
    atoms = molecule("H2O")
    atoms.rattle(0.05, seed=0)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    search = BOSaddle(atoms, logfile=None)
    assert not search.run(fmax=0.05, steps=40)
    assert search.result == SaddleResult(False, True, 2, None, HIGHER_ORDER)
    assert search.observations.state["order_steps"] == 2
    assert search.nsteps < 40
    assert len(imaginary_modes(atoms, get_calculator("gfn2"))) == 2


def test_a_first_order_saddle_point_is_converged_with_the_models_imaginary_frequency():
    atoms = guess("01_hcn")
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    search = BOSaddle(atoms, logfile=None)
    assert search.result is None  # before a run
    assert not search.run(fmax=0.05, steps=1)
    assert search.result == SaddleResult(False, False, None, None, STEPS)
    assert search.run(fmax=0.05)
    result = search.result
    assert result.converged and result.forces_converged
    assert (result.order, result.reason) == (1, FIRST_ORDER)
    (target,) = imaginary_modes(atoms, get_calculator("gfn2"))  # 1426 cm-1
    assert result.imaginary == pytest.approx(target, rel=0.05)


def test_the_result_gives_the_overlap_of_its_mode_with_the_mode_climbed_in_any_orientation():
    ends = []
    for angle in (0.0, 70.0):
        atoms = guess("02_hcch")
        atoms.rotate(angle, "x", center="COP")
        atoms.rotate(angle / 2, "z", center="COP")
        atoms.calc = get_calculator("gfn2")
        log = io.StringIO()
        search = BOSaddle(atoms, logfile=log, prior="lindh")  # a model prior: no call
        assert search.run(fmax=0.05)
        start_mode = np.asarray(search.observations.state["start_mode"])
        assert np.linalg.norm(start_mode) == pytest.approx(1.0)
        overlap = search.result.overlap
        assert 0.0 <= overlap <= 1.0 + 1e-9
        assert f"overlaps the mode climbed from the start by {overlap:.2f}" in log.getvalue()
        ends.append((search.result, atoms.get_potential_energy()))
    # the overlap turns the start onto the end: the same in any orientation of the guess
    (first, first_energy), (turned, turned_energy) = ends
    assert turned_energy == pytest.approx(first_energy, abs=1e-6)  # the same endpoint
    assert turned.overlap == pytest.approx(first.overlap, abs=1e-3)
    # the model's Hessian there by central differences of its gradient: to a few 1e-3
    assert turned.imaginary == pytest.approx(first.imaginary, rel=5e-3)


class FailsAt(Calculator):
    """The calculator ``calc`` until its ``at``-th call, which raises ``error``; the
    positions of every call in ``seen``."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, calc, at, error):
        super().__init__()
        self.calc, self.at, self.error, self.seen = calc, at, error, []

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.seen.append(self.atoms.positions.copy())
        if len(self.seen) == self.at:
            raise self.error
        self.calc.calculate(self.atoms, properties, system_changes)
        self.results = dict(self.calc.results)


ERRORS = [
    RuntimeError("Geometry update ODE is taking too long to converge!"),
    np.linalg.LinAlgError("SVD did not converge"),
]


@pytest.mark.parametrize("error", ERRORS, ids=["sella", "linalg"])
def test_a_walk_that_fails_ends_at_the_last_configuration_it_reached(error):
    atoms = guess("01_hcn")
    atoms.calc = get_calculator("gfn2")
    search = BOSaddle(atoms, logfile=None)
    search.run(fmax=0.05, steps=1)  # two configurations computed
    known = np.array(search.observations.positions)
    gp = search._fitted()
    whole = FailsAt(ModelCalculator(gp), 0, error)
    end, reason = saddle_on_model(whole, atoms, known, 10.0, 0.01, 300)
    assert reason == "model saddle" and len(whole.seen) == 15  # 0.29 Å from the start
    first = FailsAt(ModelCalculator(gp), 1, error)
    end, reason = saddle_on_model(first, atoms, known, 10.0, 0.01, 300)
    assert reason == "walk failed"
    np.testing.assert_array_equal(end, atoms.positions)
    # calls 2-4 probe the lowest mode at the start, 5-8 are the walk's first steps
    later = FailsAt(ModelCalculator(gp), 9, error)
    end, reason = saddle_on_model(later, atoms, known, 10.0, 0.01, 300)
    assert reason == "walk failed"
    np.testing.assert_allclose(end, whole.seen[7], atol=1e-9)
    assert np.abs(end - atoms.positions).max() > 0.2


def test_a_prior_that_fails_where_the_order_is_read_leaves_the_order_unknown():
    # a prior calculator that fails once the forces are converged (its curvature there
    # is read by differences): run(), result and summary() raised its error, and the
    # search's end was lost
    from ase.calculators.calculator import CalculationFailed
    from ase.calculators.emt import EMT

    from asebo.benchmarks.hop_saddles import HOPS, hop_guess
    from asebo.saddle.result import ORDER_UNKNOWN

    class FailsOnceConverged(EMT):
        failing = False

        def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
            if self.failing:
                raise CalculationFailed("SCF not converged")
            super().calculate(atoms, properties, system_changes)

    atoms = hop_guess(*HOPS["au_al100"]())
    atoms.calc = EMT()
    prior = FailsOnceConverged()
    search = BOSaddle(atoms, logfile=None, prior=prior)

    def fail_once_converged():
        prior.failing = np.linalg.norm(atoms.get_forces(), axis=1).max() < 0.05

    search.attach(fail_once_converged)
    assert not search.run(fmax=0.05, steps=60)
    assert search.result == SaddleResult(False, True, None, None, ORDER_UNKNOWN)
    assert "the order is not known" in search.summary()
