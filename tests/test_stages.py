"""The optimizer's parts as objects: representations, priors, settings, recorded reasons."""

import json

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.emt import EMT

from asebo import BOOptimizer
from asebo.model.gp import EnergyForceGP
from asebo.model.lindh import LindhModel
from asebo.model.priors import (
    CalculatorPrior,
    ConstantPrior,
    HighestEnergyPrior,
    MeanEnergyPrior,
    RecentredLindh,
    make_prior,
)
from asebo.optimize.proposal import REASONS
from asebo.optimize.representations import (
    AlignedPositions,
    CartesianPositions,
    InternalCoordinates,
    make_representation,
)
from asebo.optimize.settings import ModelSettings, SearchSettings, TrustSettings
from calculators import get_calculator


def rattled_water(seed=3):
    """Water rattled by 0.1 Å under EMT, a calculator that repeats itself to the bit."""
    atoms = molecule("H2O")
    atoms.positions += 0.1 * np.random.default_rng(seed).normal(size=(3, 3))
    atoms.calc = EMT()
    return atoms


def path(**options):
    atoms = rattled_water()
    opt = BOOptimizer(atoms, logfile=None, **options)
    opt.run(fmax=0.01, steps=5)
    return np.array(opt.positions_seen), opt


def test_objects_take_the_same_path_as_their_names():
    by_name, _ = path(kernel="anisotropic", prior="lindh", recentre=0.3)
    atoms = rattled_water()
    by_object, opt = path(kernel=AlignedPositions(), prior=RecentredLindh(atoms, recentre=0.3))
    np.testing.assert_array_equal(by_name, by_object)
    assert opt.todict()["kernel"] == "anisotropic" and opt.todict()["prior"] == "lindh"


def test_settings_objects_and_arguments_agree():
    by_argument, _ = path(kappa=0.0, maxstep=0.15, trust_radius=0.05)
    by_settings, opt = path(
        search=SearchSettings(kappa=0.0), trust_region=TrustSettings(maxstep=0.15, radius=0.05)
    )
    np.testing.assert_array_equal(by_argument, by_settings)
    assert opt.settings.trust_region.maxstep == 0.15 and opt.trust.settings.floor == 1e-3
    # a changed setting changes the path: the settings are used, not only stored
    other, _ = path(search=SearchSettings(kappa=1.0))
    assert not np.array_equal(other[1:3], by_argument[1:3])


def test_the_representation_sets_trend_and_recentring_and_model_settings_override_them():
    atoms = rattled_water()
    internal = BOOptimizer(atoms, logfile=None)
    assert isinstance(internal.representation, InternalCoordinates)
    assert internal.settings.model.trend == InternalCoordinates.default_trend == 30.0
    assert internal.recentre == InternalCoordinates.default_recentre == 2.0
    assert internal.prior.prior_by_forces is InternalCoordinates.prior_by_forces is True
    aligned = BOOptimizer(atoms, logfile=None, kernel="anisotropic")
    assert aligned.settings.model.trend == 0.0 and aligned.recentre == 0.3
    assert aligned.prior.prior_by_forces is False
    chosen = BOOptimizer(atoms, logfile=None, model=ModelSettings(trend=5.0, recentre=1.0))
    assert chosen.settings.model.trend == chosen.gp.trend == 5.0 and chosen.prior.recentre == 1.0


def test_names_become_objects_once_and_bad_names_are_refused():
    atoms = rattled_water()
    assert isinstance(make_representation("cartesian", atoms), CartesianPositions)
    assert isinstance(make_representation(None, atoms), InternalCoordinates)
    with pytest.raises(ValueError, match="kernel must be"):
        make_representation("internal-coordinates", atoms)
    assert isinstance(make_prior("max", atoms, 0.3), HighestEnergyPrior)
    assert isinstance(make_prior("mean", atoms, 0.3), MeanEnergyPrior)
    assert make_prior(-1.5, atoms, 0.3).energy == -1.5
    assert isinstance(make_prior(EMT(), atoms, 0.3), CalculatorPrior)
    with pytest.raises(ValueError, match="prior must be"):
        make_prior("lindhh", atoms, 0.3)


def test_prior_objects_answer_one_interface():
    atoms = rattled_water()
    positions = np.array([atoms.positions, atoms.positions + 0.05])  # (2, 3, 3)
    energies = np.array([-1.0, -3.0])
    for prior, offset in (
        (HighestEnergyPrior(), -1.0),
        (MeanEnergyPrior(), -2.0),
        (ConstantPrior(4.0), 4.0),
    ):
        own, gradients = prior.energies_and_gradients(positions)
        assert prior.constant and not own.any() and not gradients.any()
        assert prior.offset(energies, own) == offset
    calculator = CalculatorPrior(get_calculator("gfn2"), atoms)  # any calculator
    own, gradients = calculator.energies_and_gradients(positions)
    for k in range(2):
        energy, forces = calculator.energy_and_forces(positions[k])
        assert own[k] == energy
        np.testing.assert_array_equal(gradients[k], -forces)
    assert calculator.offset(energies, own) == pytest.approx(np.mean(energies - own))
    assert not calculator.constant and calculator.is_calculator


def test_a_gp_takes_a_prior_by_name_or_object_alike():
    atoms = rattled_water()
    positions = np.array([atoms.positions, atoms.positions + 0.05, atoms.positions - 0.04])
    values = [CalculatorPrior(atoms.calc, atoms).energy_and_forces(p) for p in positions]
    energies, forces = np.array([v[0] for v in values]), np.array([v[1] for v in values])
    test = positions[0] + 0.02
    named = EnergyForceGP(prior="max").fit(positions, energies, forces).predict(test)
    made = EnergyForceGP(prior=HighestEnergyPrior()).fit(positions, energies, forces)
    assert made.predict(test) == named
    assert made.prior_offset_ == energies.max()


def test_lindh_model_takes_its_reference_angles_as_an_argument():
    atoms = molecule("H2O")
    plain = LindhModel(atoms.positions, atoms.numbers)
    shift = 0.1  # rad, every bend
    shifted = LindhModel(
        atoms.positions, atoms.numbers, reference_angles=plain.reference_angles + shift
    )
    # at the reference geometry only the bends are strained: 0.5 k (d theta)^2 each
    expected = 0.5 * np.sum(plain.bend_constants * shift**2)
    assert shifted.energy_and_forces(atoms.positions)[0] == pytest.approx(expected, rel=1e-12)
    assert plain.energy_and_forces(atoms.positions)[0] == 0.0
    by_function = LindhModel(
        atoms.positions, atoms.numbers, reference_angles=lambda bends, angles: angles + shift
    )
    np.testing.assert_array_equal(by_function.reference_angles, shifted.reference_angles)
    with pytest.raises(ValueError, match="one angle per bend"):
        LindhModel(atoms.positions, atoms.numbers, reference_angles=[1.0, 2.0, 3.0, 4.0])


def test_reasons_are_recorded_and_old_restart_files_without_them_resume(tmp_path):
    restart = tmp_path / "bo.json"
    uninterrupted, opt = path()
    assert opt.reasons and set(opt.reasons) <= set(REASONS)
    atoms = rattled_water()
    BOOptimizer(atoms, restart=str(restart), logfile=None).run(fmax=0.01, steps=2)
    stored = json.loads(restart.read_text())
    assert [p["reason"] for p in stored["proposals"]] == opt.reasons[:2]
    del stored["proposals"]  # as a restart file written before reasons were recorded
    restart.write_text(json.dumps(stored))
    resumed = BOOptimizer(rattled_water(), restart=str(restart), logfile=None)
    resumed.run(fmax=0.01, steps=3)
    np.testing.assert_array_equal(np.array(resumed.positions_seen), uninterrupted)
    assert resumed.reasons == opt.reasons[2:]
