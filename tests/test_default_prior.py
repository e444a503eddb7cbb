"""The one default prior of BOOptimizer, BONEB and BOSaddle (asebo.model.default_prior),
by system and target, as records: the prior each driver builds and the rule that chose
it."""

import importlib.util

import pytest
from ase import Atoms
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.calculators.mixing import LinearCombinationCalculator, SumCalculator
from ase.calculators.vasp import Vasp
from ase.mep import NEB

from asebo import BONEB, BOOptimizer
from asebo.model.default_prior import DRIVERS, default_prior
from asebo.model.priors import CalculatorPrior, HighestEnergyPrior, RecentredLindh
from calculators import CountingCalculator, get_calculator

pytest.importorskip("tblite")


def _water(calculator):
    atoms = molecule("H2O")
    atoms.calc = calculator
    return atoms


def _ammonium(calculator):
    atoms = molecule("NH3")
    atoms.append("H")
    atoms.positions[-1] = [0.0, 0.0, -1.1]
    atoms.calc = calculator
    return atoms


def _method(choice):
    return choice.prior.parameters["method"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_electronic_structure_target_takes_gfn2_for_every_driver(driver):
    pytest.importorskip("gpaw")
    for target in (get_calculator("gpaw"), CountingCalculator(get_calculator("gpaw")), Vasp()):
        choice = default_prior(_water(target), driver)
        assert choice.rule == "electronic-structure"
        assert _method(choice) == "GFN2-xTB"


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_xtb_prior_describes_the_ion_the_target_computes(driver):
    # GPAW takes the total charge as a parameter; the prior must be the same ion
    pytest.importorskip("gpaw")
    from gpaw import GPAW
    from tblite.ase import TBLite

    ammonium = _ammonium(GPAW(mode="lcao", basis="dzp", charge=1, txt=None))
    assert default_prior(ammonium, driver).prior.parameters["charge"] == 1
    neutral = _water(TBLite(method="GFN2-xTB", charge=0, verbosity=0))
    neutral.set_initial_charges([1.0, 0.0, 0.0])  # the target's charge=0 wins, as in tblite
    assert default_prior(neutral, "saddle").prior.parameters["charge"] == 0


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_gpaw_presets_charge_and_orcas_multiplicity_reach_the_xtb_prior(driver):
    # the preset keeps GPAW's options as its own (todict), not as ASE's parameters;
    # ORCA names the multiplicity 'mult', tblite 'multiplicity'
    pytest.importorskip("gpaw")
    from ase.calculators.orca import ORCA, OrcaProfile

    ammonium = _ammonium(CountingCalculator(get_calculator("gpaw", mode="lcao", charge=1)))
    assert default_prior(ammonium, driver).prior.parameters["charge"] == 1
    methylene = molecule("CH2_s3B1d")
    methylene.set_initial_magnetic_moments(None)  # the multiplicity is ORCA's alone
    methylene.calc = ORCA(charge=0, mult=3, profile=OrcaProfile(command="orca"))  # never run
    prior = default_prior(methylene, driver).prior
    assert (prior.parameters["charge"], prior.parameters["multiplicity"]) == (0, 3)


def test_a_cheap_target_takes_the_lindh_model_for_a_minimum_and_gfn2_across_a_barrier():
    for target in (EMT(), LennardJones(), None):
        choice = default_prior(_water(target), "minimum")
        assert (choice.prior, choice.rule) == ("lindh", "other-target")
        for driver in ("band", "saddle"):
            choice = default_prior(_water(target), driver)
            assert (_method(choice), choice.rule) == ("GFN2-xTB", "barrier")
    auto = default_prior(_water(EMT()), "minimum", any_target=True)
    assert _method(auto) == "GFN2-xTB"  # prior='auto': a calculator prior wherever one applies


def test_tblite_as_the_target_takes_the_lindh_model_the_highest_energy_or_the_other_method():
    water = _water(CountingCalculator(get_calculator("gfn2")))
    assert default_prior(water, "minimum").prior == "lindh"
    assert default_prior(water, "band").prior == "max"
    assert _method(default_prior(water, "saddle")) == "GFN1-xTB"
    water.calc = get_calculator("gfn1")
    assert _method(default_prior(water, "saddle")) == "GFN2-xTB"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_target_summed_with_a_correction_is_known_by_its_parts(driver):
    # GPAW plus a dispersion term, as users add D3: the prior is the electronic-structure
    # target's, of the same ion; tblite plus a term is tblite's own
    pytest.importorskip("gpaw")
    from gpaw import GPAW

    cation = _water(SumCalculator([GPAW(mode="lcao", charge=1, txt=None), LennardJones()]))
    choice = default_prior(cation, driver)
    assert (_method(choice), choice.rule) == ("GFN2-xTB", "electronic-structure")
    assert choice.prior.parameters["charge"] == 1
    mixed = LinearCombinationCalculator([Vasp(), EMT()], [1.0, 1.0])
    assert default_prior(_water(mixed), driver).rule == "electronic-structure"
    xtb = default_prior(_water(SumCalculator([get_calculator("gfn2"), EMT()])), driver)
    assert xtb.rule == f"tblite-target-{driver}"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_periodic_cell_takes_the_springs_under_any_target(driver):
    pytest.importorskip("gpaw")
    for target in (EMT(), get_calculator("gpaw")):
        crystal = bulk("Cu", cubic=True)
        crystal.calc = target
        assert (default_prior(crystal, driver).prior, default_prior(crystal, driver).rule) == (
            "springs",
            "periodic",
        )


def test_elements_xtb_does_not_describe_and_a_missing_tblite_take_the_model_prior(monkeypatch):
    heavy = Atoms("Fr2", positions=[[0, 0, 0], [0, 0, 4.0]], calculator=Vasp())
    choice = default_prior(heavy, "saddle")
    assert (choice.prior, choice.rule) == ("lindh", "no-parameters") and "[87]" in choice.reason
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tblite" else found(name, *a)
    )
    choice = default_prior(_water(Vasp()), "band")
    assert (choice.prior, choice.rule) == ("max", "no-tblite")
    assert "pip install tblite" in choice.reason


def test_each_driver_builds_its_default_and_says_why(tmp_path):
    pytest.importorskip("gpaw")
    log = tmp_path / "bo.log"
    optimizer = BOOptimizer(_water(get_calculator("gpaw")), logfile=str(log))
    assert isinstance(optimizer.prior, CalculatorPrior)
    optimizer.close()
    header, note = log.read_text().splitlines()[:2]  # ASE's header, then the choice
    assert "Step" in header and note.startswith("# prior: GFN2-xTB (tblite)")
    assert isinstance(BOOptimizer(_water(EMT()), logfile=None).prior, RecentredLindh)
    band = NEB([_water(get_calculator("gfn2")) for _ in range(3)], method="improvedtangent")
    assert isinstance(BONEB(band, logfile=None).prior, HighestEnergyPrior)
    assert isinstance(BOOptimizer(_water(EMT()), logfile=None, prior="lindh").prior, RecentredLindh)


@pytest.mark.parametrize("threads, environment, chosen", [(3, "1", 3), (None, "2", 2)])
def test_a_default_xtb_prior_computes_on_the_drivers_threads(
    monkeypatch, threads, environment, chosen
):
    from asebo import BOSaddle

    monkeypatch.setenv("OMP_NUM_THREADS", environment)
    minimum = BOOptimizer(_water(EMT()), logfile=None, prior="auto", threads=threads)
    band = NEB([_water(LennardJones()) for _ in range(3)], method="improvedtangent")
    saddle = BOSaddle(_water(get_calculator("gfn2")), logfile=None, threads=threads)
    for driver in (minimum, BONEB(band, logfile=None, threads=threads), saddle):
        assert isinstance(driver.prior, CalculatorPrior)
        assert driver.prior.calculator.threads == chosen


def test_a_gfn_xtb_prior_named_by_preset_describes_the_ion_the_target_computes(tmp_path):
    # `asebo optimize --calc gfn2:charge=1 --prior gfn1` relaxed NH4+ against a neutral
    # GFN1-xTB prior: the preset's name carried no charge
    from asebo.cli import main
    from asebo.model.priors import resolve_prior

    cation = get_calculator("gfn2:charge=1")
    assert resolve_prior("gfn1", cation).parameters["charge"] == 1
    assert resolve_prior("gfn1:multiplicity=1", cation).parameters["charge"] == 1
    assert resolve_prior("gfn2:charge=0", cation).parameters["charge"] == 0  # its own
    assert resolve_prior("gfn1").parameters.get("charge") is None
    path = tmp_path / "nh4.xyz"
    _ammonium(None).write(path)
    argv = ["optimize", str(path), "--calc", "gfn2:charge=1", "--logfile", "-"]
    assert main([*argv, "--prior", "gfn1", "--output", str(tmp_path / "with.xyz")]) == 0
