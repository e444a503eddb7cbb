"""One counted relaxation, and the prior of BOOptimizer from its name."""

import pytest
from ase.build import molecule
from ase.calculators.emt import EMT

from asebo.campaign.relax import relax
from asebo.model.priors import MODEL_PRIORS, resolve_prior


def rattled_methanol():
    atoms = molecule("CH3OH")
    atoms.rattle(0.1, seed=1)
    return atoms


def test_relax_records_the_energy_of_every_calculator_call():
    start = rattled_methanol()
    result = relax(start, "gpmin", EMT(), fmax=0.05, steps=100)
    assert result["converged"]
    assert result["calls"] > result["steps"] + 1  # GPMin calls more than once per step
    assert len(result["energies"]) == result["calls"]
    reference = start.copy()
    reference.calc = EMT()
    assert result["energies"][0] == pytest.approx(reference.get_potential_energy(), abs=1e-12)
    assert result["energies"][-1] == pytest.approx(result["energy"], abs=1e-12)
    assert start.calc is None  # the start is not modified


def test_relax_refuses_unknown_optimizers_and_priors_on_others_than_bo():
    with pytest.raises(ValueError, match="unknown optimizer 'newton': choose among bo, bfgs"):
        relax(rattled_methanol(), "newton", EMT())
    with pytest.raises(ValueError, match="only the 'bo' optimizer takes a prior"):
        relax(rattled_methanol(), "lbfgs", EMT(), prior="max")


def test_prior_names_become_model_priors_numbers_or_calculators():
    for name in MODEL_PRIORS:
        assert resolve_prior(name) == name
    assert resolve_prior(None) is None
    assert resolve_prior(2) == 2.0 and isinstance(resolve_prior(2), float)
    assert isinstance(resolve_prior("emt"), EMT)
    calculator = EMT()
    assert resolve_prior(calculator) is calculator
    with pytest.raises(ValueError, match="unknown prior 'lindhh': use one of lindh, max, mean"):
        resolve_prior("lindhh")
