"""Tight convergence: fmax checked before any call, a tight fmax met, and a run whose
forces reach the calculator's noise stopped with its lowest configuration."""

import io

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.emt import EMT

from asebo import BOOptimizer
from calculators import CountingCalculator, get_calculator


@pytest.mark.parametrize(
    ("method", "fmax"),
    [("run", 0.0), ("run", -1.0), ("run", float("nan")), ("irun", -1.0), ("irun", float("nan"))],
)
def test_an_fmax_that_cannot_be_met_is_refused_before_any_call(method, fmax):
    water = molecule("H2O")
    water.calc = CountingCalculator(EMT())
    optimizer = BOOptimizer(water, logfile=None)
    with pytest.raises(ValueError, match=r"^fmax must be a finite number > 0, got") as error:
        getattr(optimizer, method)(fmax=fmax)
    assert "\n" not in str(error.value)
    assert water.calc.ncalls == 0


def relaxed_water(fmax):
    water = molecule("H2O")
    water.rattle(0.05, seed=1)
    water.calc = CountingCalculator(get_calculator("gfn2"))
    log = io.StringIO()
    optimizer = BOOptimizer(water, logfile=log)
    converged = optimizer.run(fmax=fmax, steps=100)
    return water, optimizer, converged, log.getvalue()


def test_water_converges_to_a_tight_fmax_with_gfn2():
    """The model's Newton step along the forces, shorter than any trust box, reaches
    forces of 1e-5 eV/Å, where steps of the box's floor found only configurations
    computed already."""
    water, _, converged, _ = relaxed_water(1e-5)
    assert converged
    assert np.linalg.norm(water.get_forces(), axis=1).max() < 1e-5
    assert water.calc.ncalls < 30


def test_a_run_below_the_calculators_noise_stops_with_its_lowest_configuration():
    water, optimizer, converged, log = relaxed_water(1e-9)
    assert not converged
    assert "are at the calculator's noise level" in log
    best = optimizer.observations.best()
    np.testing.assert_array_equal(water.positions, optimizer.observations.positions[best])
