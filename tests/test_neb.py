"""BONEB: ASE's NEB forces reproduced, the Müller-Brown saddle and the Au/Al(100)
barrier reached in fewer calls than ASE's NEB, resumed without a repeated call, bad
input refused before any call."""

from functools import partial

import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule
from ase.calculators.calculator import (
    CalculationFailed,
    PropertyNotImplementedError,
    all_changes,
)
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixCartesian
from ase.io import read
from ase.mep import NEB
from ase.optimize import BFGS, FIRE
from scipy.spatial.transform import Rotation

from asebo import BONEB
from asebo.benchmarks.neb import au_on_al100
from asebo.model.gp import EnergyForceGP
from asebo.model.priors import CalculatorPrior, HighestEnergyPrior, PriorCalculationError
from asebo.neb.band import OnceAtEachBand, band_forces, like
from asebo.neb.choice import MOVED_AS_A_WHOLE, STEPPED
from asebo.neb.relax import relax_on_model
from asebo.optimize.model_calculators import ComputedValues, ModelCalculator
from asebo.optimize.observations import RestartError
from asebo.optimize.settings import BandSettings, WalkTrustSettings
from asebo.optimize.walk_trust import adapted_radius, distance_to
from calculators import get_calculator
from calculators.muller_brown import MINIMUM_A, MINIMUM_B, SADDLE_AB, MullerBrown

SCALE = 0.01  # eV per unit of the Müller-Brown surface


class Counted:
    """Calls of a calculator class, with the positions of each (shared by its copies)."""

    def __init__(self, base):
        calls = self.calls = []

        class Counting(base):
            def calculate(self, atoms=None, properties=("energy",), system_changes=()):
                calls.append(np.array(atoms.positions))
                super().calculate(atoms, properties, system_changes)

        self.make = Counting


def muller_brown_band(moving=5, calculator=MullerBrown):
    """A straight band from minimum A to minimum B of the Müller-Brown surface."""
    first = Atoms("H", positions=[[*MINIMUM_A, 0.0]])
    last = Atoms("H", positions=[[*MINIMUM_B, 0.0]])
    images = [first] + [first.copy() for _ in range(moving)] + [last]
    neb = NEB(images, climb=True, method="improvedtangent")
    neb.interpolate()
    for image in images:
        image.calc = calculator(scale=SCALE)
    return neb


def au_al_endpoints():
    """ASE's NEB tutorial: Au on Al(100) hollow sites, the lower layers held, relaxed."""
    initial, final, _ = au_on_al100()
    return initial, final


def au_al_band(endpoints, calculator=EMT, moving=3):
    initial, final = endpoints
    images = [initial.copy() for _ in range(moving + 1)] + [final.copy()]
    neb = NEB(images, climb=True, method="improvedtangent")
    neb.interpolate()
    for image in images:
        image.calc = calculator()
    return neb


def barrier(neb):
    energies = [image.get_potential_energy() for image in neb.images]
    return max(energies) - energies[0]


@pytest.fixture(scope="module")
def au_al():
    return au_al_endpoints()


@pytest.fixture(scope="module")
def muller_brown_run(tmp_path_factory):
    """BONEB on the Müller-Brown band, uninterrupted: (neb, converged, calls)."""
    counted = Counted(MullerBrown)
    neb = muller_brown_band(calculator=counted.make)
    restart = tmp_path_factory.mktemp("mb") / "band.json"
    converged = BONEB(neb, restart=restart, logfile=None).run(fmax=0.05, steps=60)
    return neb, converged, counted.calls


def test_band_forces_are_ase_neb_forces_on_muller_brown():
    neb = muller_brown_band()
    for image, step in zip(neb.images[1:-1], (0.05, -0.1, 0.2, 0.0, -0.03)):
        image.positions[0, 0] += step  # off the straight line: curved tangents
    expected = neb.get_forces().reshape(-1, 1, 3)
    positions = np.array([image.positions for image in neb.images])
    energies = [image.get_potential_energy() for image in neb.images]
    forces = [image.get_forces() for image in neb.images]
    band, climbing = band_forces(neb, positions, energies, forces)
    np.testing.assert_allclose(band, expected, rtol=1e-12, atol=1e-14)
    assert climbing == int(np.argmax(energies[1:-1]))


def test_band_forces_are_ase_neb_forces_with_fixed_atoms(au_al):
    neb = au_al_band(au_al)
    expected = neb.get_forces().reshape(3, -1, 3)
    positions = np.array([image.positions for image in neb.images])
    energies = [image.get_potential_energy() for image in neb.images]
    forces = [image.get_forces(apply_constraint=False) for image in neb.images]
    band, _ = band_forces(neb, positions, energies, forces)
    np.testing.assert_allclose(band, expected, rtol=1e-12, atol=1e-14)
    assert np.abs(band[:, :8]).max() == 0.0  # the held layers


def test_muller_brown_saddle_in_fewer_calls_than_fire(muller_brown_run):
    neb, converged, calls = muller_brown_run
    assert converged
    fire_counted = Counted(MullerBrown)
    fire_band = muller_brown_band(calculator=fire_counted.make)
    for image in (fire_band.images[0], fire_band.images[-1]):
        image.calc = MullerBrown(scale=SCALE)
    assert FIRE(fire_band, logfile=None).run(fmax=0.05, steps=2000)
    moving = len(calls) - 2  # the endpoints are computed once each
    assert moving < len(fire_counted.calls) / 4
    energies = [image.get_potential_energy() for image in neb.images]
    top = int(np.argmax(energies))
    assert np.linalg.norm(neb.images[top].positions[0, :2] - SADDLE_AB) < 0.01
    assert energies[top] / SCALE == pytest.approx(-40.665, abs=0.05)


def test_a_band_whose_model_smooths_over_its_calls_steps_along_the_computed_forces(tmp_path):
    # a GP noise of 1 eV and 1 eV/Å, 500 times the default: the model's band comes to
    # rest with every image computed while the computed NEB forces are still above fmax
    neb = muller_brown_band()
    smooth = {"energy_noise": 1.0, "gradient_noise": 1.0}
    optimizer = BONEB(neb, logfile=None, gp_options=smooth)
    assert optimizer.run(fmax=0.05, steps=100)
    assert STEPPED in [choice["reason"] for choice in optimizer.choices]
    energies = [image.get_potential_energy() for image in neb.images]
    top = int(np.argmax(energies))
    assert np.linalg.norm(neb.images[top].positions[0, :2] - SADDLE_AB) < 0.01


def test_no_geometry_computed_twice(muller_brown_run):
    _, _, calls = muller_brown_run
    calls = np.array(calls)  # (c, 1, 3)
    distances = np.abs(calls[:, None] - calls[None]).max(axis=(2, 3))
    np.fill_diagonal(distances, np.inf)
    assert distances.min() > 1e-10


def test_resumed_band_repeats_no_call_and_ends_as_the_uninterrupted(muller_brown_run, tmp_path):
    uninterrupted, _, calls = muller_brown_run
    counted = Counted(MullerBrown)
    restart = tmp_path / "band.json"
    first = BONEB(muller_brown_band(calculator=counted.make), restart=restart, logfile=None)
    assert not first.run(fmax=0.05, steps=4)
    assert first.nsteps == 4
    neb = muller_brown_band(calculator=counted.make)
    assert BONEB(neb, restart=restart, logfile=None).run(fmax=0.05, steps=60)
    assert len(counted.calls) == len(calls)
    np.testing.assert_allclose(np.array(counted.calls), np.array(calls), atol=1e-10)
    for image, expected in zip(neb.images, uninterrupted.images):
        np.testing.assert_allclose(image.positions, expected.positions, atol=1e-10)
    again = Counted(MullerBrown)
    finished = BONEB(muller_brown_band(calculator=again.make), restart=restart, logfile=None)
    assert finished.run(fmax=0.05) and not again.calls


def test_a_failed_call_says_how_to_go_on_and_the_band_resumes_without_a_repeat(
    muller_brown_run, tmp_path
):
    _, _, calls = muller_brown_run

    class FailingOnTheFifthCall(MullerBrown):
        made = 0

        def calculate(self, atoms=None, properties=("energy",), system_changes=()):
            FailingOnTheFifthCall.made += 1
            if FailingOnTheFifthCall.made == 5:
                raise CalculationFailed("SCF not converged")
            super().calculate(atoms, properties, system_changes)

    first = Counted(FailingOnTheFifthCall)
    restart = tmp_path / "band.json"
    failing = BONEB(muller_brown_band(calculator=first.make), restart=restart, logfile=None)
    with pytest.raises(CalculationFailed) as raised:
        failing.run(fmax=0.05, steps=60)
    failing.close()
    assert f"restart={str(restart)!r}" in raised.value.__notes__[0]
    assert failing.nsteps == 2  # the endpoints' two calls are not the moving images'
    second = Counted(MullerBrown)
    assert BONEB(muller_brown_band(calculator=second.make), restart=restart, logfile=None).run(
        fmax=0.05, steps=60
    )
    # the failed call, which left nothing, is made again; no other
    made = np.array(first.calls[:-1] + second.calls)
    np.testing.assert_allclose(made, np.array(calls), atol=1e-10)


def test_au_al_barrier_of_bfgs_in_at_most_15_calls(au_al, tmp_path):
    counted = Counted(EMT)
    neb = au_al_band(au_al, counted.make)
    trajectory, calls = tmp_path / "band.traj", tmp_path / "calls.traj"
    optimizer = BONEB(
        neb, trajectory=str(trajectory), calls_trajectory=str(calls), logfile=str(tmp_path / "log")
    )
    assert optimizer.run(fmax=0.05, steps=40)
    moving = len(counted.calls) - 2
    assert optimizer.nsteps == optimizer.calls == moving
    reference_counted = Counted(EMT)
    reference = au_al_band(au_al, reference_counted.make)
    assert BFGS(reference, logfile=None).run(fmax=0.05, steps=500)
    assert moving <= 15 < len(reference_counted.calls) - 2
    assert barrier(neb) == pytest.approx(barrier(reference), abs=0.02)
    lines = (tmp_path / "log").read_text().splitlines()
    assert len(lines) == 1 + 1 + moving  # the header, the band before any call, a line per call
    assert len(read(calls, index=":")) == len(counted.calls)
    bands = read(trajectory, index=":")  # a band per step, the first before any call
    assert len(bands) == (optimizer.nsteps + 1) * len(neb.images)
    last = bands[-len(neb.images) :]
    for frame, image in zip(last, neb.images):
        np.testing.assert_array_equal(frame.positions, image.positions)
        assert frame.get_potential_energy() == pytest.approx(image.get_potential_energy(), abs=1e-9)


def test_a_relaxation_stopped_by_the_trust_radius_ends_on_it():
    # the Müller-Brown surface itself in place of the GP: only the endpoints are known
    neb = muller_brown_band(3)
    start = neb.get_positions().reshape(3, 1, 3).copy()
    known = np.array([neb.images[0].positions, neb.images[-1].positions])  # (2, 1, 3)
    held = np.zeros(5, dtype=bool)
    assert relax_on_model(neb, known, 0.05, 0.01, 500, FIRE, held) == "trust radius"
    ends = neb.get_positions().reshape(3, 1, 3)
    reach = [
        distance_to(np.concatenate([known, begin[None]]), end) for begin, end in zip(start, ends)
    ]
    assert max(reach) == pytest.approx(0.05, abs=1e-7)


@pytest.mark.parametrize("aligned", [False, True])
def test_a_band_evaluated_once_at_each_configuration_moves_as_ase_neb(au_al, aligned):
    """The model band answers an optimizer's repeated asks at one configuration with
    the first's forces: the same steps as ASE's NEB, with at most half its asks of the
    images; where removing rotations moves the images at each evaluation, the same
    steps with every ask."""
    asks = []

    class Asked(EMT):
        def get_property(self, name, atoms=None, allow_calculation=True):
            asks.append(name)
            return super().get_property(name, atoms, allow_calculation)

    runs = []
    for kind in (NEB, OnceAtEachBand):
        neb = au_al_band(au_al, Asked)
        neb.remove_rotation_and_translation = aligned
        band = like(neb, neb.images, kind=kind)
        asks.clear()
        FIRE(band, logfile=None).run(fmax=0.01, steps=6)
        runs.append((band, len(asks)))
    (plain, plain_asks), (once, once_asks) = runs
    np.testing.assert_array_equal(once.get_positions(), plain.get_positions())
    np.testing.assert_array_equal(once.get_forces(), plain.get_forces())
    assert once.emax == plain.emax and once.imax == plain.imax
    assert once_asks <= plain_asks / 2 or aligned


def test_computed_values_follow_their_configuration_moved_as_a_whole():
    water = molecule("H2O")
    forces = np.array([[0.1, -0.2, 0.3], [0.0, 0.4, -0.1], [-0.1, -0.2, -0.2]])
    water.calc = ComputedValues(water, -1.5, forces)
    turn = Rotation.from_rotvec([0.3, -0.2, 0.5])
    centre = water.positions.mean(axis=0)
    water.positions = turn.apply(water.positions - centre) + centre + [1.0, -2.0, 0.5]
    assert water.get_potential_energy() == -1.5
    np.testing.assert_allclose(water.get_forces(), turn.apply(forces), atol=1e-12)
    water.positions[1, 0] += 1e-6  # no longer a rigid motion: no value
    with pytest.raises(PropertyNotImplementedError):
        water.get_forces()


def test_the_model_band_calculators_follow_every_change_of_configuration():
    water = molecule("H2O")
    water.calc = EMT()
    configurations = [water.positions + 0.05 * k * np.eye(3)[k % 3] for k in range(4)]
    values = []
    for positions in configurations:
        water.positions = positions
        values.append((water.get_potential_energy(), water.get_forces()))
    gp = EnergyForceGP(kernel="cartesian", prior="mean").fit(
        np.array(configurations), np.array([e for e, _ in values]), np.array([f for _, f in values])
    )
    model = water.copy()
    model.calc = ModelCalculator(gp)
    for shift in (0.0, 1e-9, 0.02):  # a shift of 1e-9 Å is a new configuration too
        model.positions = configurations[0] + shift
        energy, gradient = gp.predict(model.positions, return_gradient=True)
        assert model.get_potential_energy() == pytest.approx(float(energy), abs=1e-12)
        np.testing.assert_allclose(model.get_forces(), -np.asarray(gradient), atol=1e-12)
    computed = water.copy()
    computed.calc = ComputedValues(computed, *values[-1])
    assert computed.get_potential_energy() == values[-1][0]
    for change in ("positions", "numbers", "cell", "pbc"):
        changed = computed.copy()
        changed.calc = computed.calc
        if change == "positions":  # the O-H bonds stretched by 1e-9 Å
            changed.positions[0, 2] += 1e-9
        elif change == "numbers":
            changed.numbers[0] = 9
        elif change == "cell":
            changed.cell = 10.0 * np.eye(3)
        else:
            changed.pbc = True
        with pytest.raises(PropertyNotImplementedError):
            changed.get_forces()


class _NoValueLeftOf(MullerBrown):
    """The Müller-Brown surface without a value left of x = ``wall``, as a GP whose prior
    calculator fails there (an SCF that does not converge)."""

    def __init__(self, wall, **kwargs):
        super().__init__(**kwargs)
        self.wall = wall

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        if atoms.positions[0, 0] < self.wall:
            raise PriorCalculationError("the prior calculator failed")
        super().calculate(atoms, properties, system_changes)


def test_a_relaxation_stops_on_the_last_band_the_model_has_a_value_for():
    # unbounded, the band moves to x = -0.85 (its first image); no value left of -0.6
    neb = muller_brown_band(3, partial(_NoValueLeftOf, -0.6))
    start = neb.get_positions().copy()
    known = np.array([neb.images[0].positions, neb.images[-1].positions])  # (2, 1, 3)
    held = np.zeros(5, dtype=bool)
    assert relax_on_model(neb, known, 10.0, 0.01, 500, FIRE, held) == "prior failed"
    ends = neb.get_positions()  # (3, 3)
    assert ends[:, 0].min() >= -0.6 and np.abs(ends - start).max() > 0.1
    assert np.isfinite(neb.get_forces()).all()  # a value for every image, no failure


@pytest.mark.parametrize(
    ("error", "stopped", "expected"),
    [
        (0.2, True, 0.4),  # a good prediction where the radius stopped the walk: doubled
        (0.2, False, 0.2),  # good, but the radius did not stop the walk: kept
        (1.0, True, 0.2),  # between good and the force itself: kept
        (3.0, True, 0.1),  # an error beyond the largest force: halved
    ],
)
def test_the_trust_radius_follows_the_force_error(error, stopped, expected):
    computed = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # largest force 2 eV/Å
    predicted = computed + [[0.0, error, 0.0], [0.0, 0.0, 0.0]]
    assert adapted_radius(0.2, computed, predicted, 0.05, stopped, 0.5) == expected
    assert adapted_radius(0.4, computed, predicted, 0.05, stopped, 0.5) == min(2 * expected, 0.5)
    smallest = WalkTrustSettings().min_radius
    floor = adapted_radius(smallest, computed, predicted, 0.05, stopped, 0.5)
    assert floor >= smallest


def _bad_bands():
    def other_atoms():
        neb = muller_brown_band(3)
        neb.images[2] = Atoms("He", positions=[[0.0, 0.0, 0.0]], calculator=MullerBrown())
        return neb

    def other_cell():
        neb = muller_brown_band(3)
        neb.images[2].cell = [5.0, 5.0, 5.0]
        return neb

    def no_moving_image():
        neb = muller_brown_band(3)
        neb.images = [neb.images[0], neb.images[-1]]
        return neb

    def endpoint_without_calculator():
        neb = muller_brown_band(3)
        neb.images[-1].calc = None
        return neb

    def moving_without_calculator():
        neb = muller_brown_band(3)
        neb.images[2].calc = None
        return neb

    def moving_read_from_a_file():
        neb = muller_brown_band(3)
        image = neb.images[2]
        image.calc = SinglePointCalculator(image, energy=0.0, forces=np.zeros((len(image), 3)))
        return neb

    def unknown_method():
        neb = muller_brown_band(3)
        neb.method = "elastic"
        return neb

    def fix_cartesian():
        neb = muller_brown_band(3)
        for image in neb.images:
            image.set_constraint(FixCartesian(0, mask=(False, False, True)))
        return neb

    return [
        (other_atoms, ValueError, "other atoms"),
        (other_cell, ValueError, "cell"),
        (no_moving_image, ValueError, "no moving one"),
        (endpoint_without_calculator, ValueError, "an endpoint, has no calculator"),
        (moving_without_calculator, ValueError, "a moving image, has no calculator"),
        (moving_read_from_a_file, ValueError, "moving image 2 needs a calculator that computes"),
        (unknown_method, ValueError, "not one of ASE's"),
        (fix_cartesian, ValueError, "FixCartesian"),
    ]


@pytest.mark.parametrize(("build", "error", "words"), _bad_bands())
def test_bad_band_refused_before_any_call(build, error, words):
    neb = build()
    with pytest.raises(error, match=words) as raised:
        BONEB(neb, logfile=None)
    assert "\n" not in str(raised.value)
    computed = [
        image.calc.results
        for image in neb.images
        if image.calc is not None and not isinstance(image.calc, SinglePointCalculator)
    ]
    assert not any(computed)


@pytest.mark.parametrize(
    "options", [{"trust_radius": 0.0}, {"uncertainty": -1.0}, {"model_fmax": float("nan")}]
)
def test_bad_setting_refused(options):
    with pytest.raises(ValueError, match=f"{next(iter(options))} must be"):
        BONEB(muller_brown_band(3), logfile=None, **options)


def test_a_single_configuration_is_refused():
    with pytest.raises(TypeError, match="ase.mep.NEB"):
        BONEB(Atoms("H"), logfile=None)


def small_band(name, calculator):
    start = molecule(name)
    moved = start.copy()
    moved.positions[1, 0] += 0.2
    images = [start, start.copy(), moved]
    for image in images:
        image.calc = calculator()
    return NEB(images, climb=True, method="improvedtangent")


@pytest.mark.parametrize("name, kernel", [("H2O", "inverse"), ("H2", "cartesian")])
def test_a_molecule_band_under_xtb_takes_the_highest_energy_and_inverse_distances(
    name, kernel, tmp_path
):
    pytest.importorskip("tblite")
    log = tmp_path / "band.log"
    optimizer = BONEB(small_band(name, partial(get_calculator, "gfn2")), logfile=str(log))
    optimizer.run(fmax=0.05, steps=0)
    optimizer.close()
    assert optimizer.representation.name == kernel
    assert isinstance(optimizer.prior, HighestEnergyPrior)
    assert "prior: the highest energy computed: the target is tblite itself" in log.read_text()


def test_a_molecule_band_under_another_calculator_takes_a_gfn2_prior(tmp_path):
    pytest.importorskip("tblite")
    log = tmp_path / "band.log"
    optimizer = BONEB(small_band("H2O", EMT), logfile=str(log))
    optimizer.run(fmax=0.05, steps=0)
    optimizer.close()
    assert isinstance(optimizer.prior, CalculatorPrior)
    water = molecule("H2O")
    water.calc = get_calculator("gfn2")
    energy, _ = optimizer.prior.energy_and_forces(water.positions)
    assert energy == pytest.approx(water.get_potential_energy(), abs=1e-8)
    assert "prior: GFN2-xTB (tblite), the GP learns the difference" in log.read_text()
    given = BONEB(small_band("H2O", EMT), logfile=None, prior="max")
    assert isinstance(given.prior, HighestEnergyPrior)


@pytest.mark.parametrize("free_energy, expected", [(-0.25, -0.25), (None, 0.5)])
def test_a_computed_image_takes_the_force_consistent_energy_where_given(free_energy, expected):
    from ase.calculators.singlepoint import SinglePointCalculator

    from asebo.optimize.observed_atoms import ComputedResults

    atoms = molecule("H2O")
    forces = np.arange(9.0).reshape(3, 3)
    results = {"energy": 0.5, "forces": forces}
    if free_energy is not None:
        results["free_energy"] = free_energy
    atoms.calc = SinglePointCalculator(atoms, **results)
    energy, computed = ComputedResults().results(atoms)
    assert energy == expected
    np.testing.assert_array_equal(computed, forces)


@pytest.mark.parametrize(
    "name, prior, steps",
    [
        ("02_hcn", "gfn1", 60),  # HCN -> HNC on a GFN1-xTB prior
        ("04_cpht", None, 100),  # cyclopentadiene's [1,5] H shift, 11 atoms, BONEB's default
    ],
)
def test_a_band_reaches_the_barrier_of_ase_neb_with_bfgs(name, prior, steps):
    """GFN2-xTB bands. BONEB's default under tblite is the highest energy computed and
    the inverse distances, whose gradients it observes only where they move: on the
    11-atom band that is what converges it."""
    pytest.importorskip("tblite")
    from asebo.benchmarks.neb import REACTIONS, band, gfn2, idpp_band, reaction, run_optimizer

    initial, final, moving = reaction(REACTIONS / f"{name}.xyz")
    positions = idpp_band(initial, final, moving)
    _, bfgs_converged, bfgs_barrier = run_optimizer(
        "BFGS", band(initial, final, positions, gfn2), 0.05, 300
    )
    calls, converged, barrier = run_optimizer(
        "BONEB", band(initial, final, positions, gfn2), 0.05, steps, prior=prior
    )
    assert bfgs_converged and converged
    assert barrier == pytest.approx(bfgs_barrier, abs=2e-3)


def test_a_net_force_the_model_cannot_see_is_moved_off_image_by_image(tmp_path):
    """A closed-form egg-box on the images (GFN2-xTB plus a ripple of the centroid):
    the rotation-invariant GP sees no net force, so the band comes to rest on the
    model; images are then moved as a whole until ASE's NEB forces on the computed
    values are below fmax."""
    pytest.importorskip("tblite")
    from test_saddle import CentroidRipple

    from asebo.benchmarks.neb import REACTIONS, band, idpp_band, reaction

    initial, final, moving = reaction(REACTIONS / "02_hcn.xyz")
    positions = idpp_band(initial, final, moving)  # (7, 3, 3)
    positions[..., 0] += 0.05 - positions[..., 0].mean()  # the band on the ripple's slope
    # a net force of up to 0.10 eV/Å on each atom, twice fmax (GPAW's grid: about fmax)
    neb = band(initial, final, positions, partial(CentroidRipple, amplitude=0.01))
    optimizer = BONEB(neb, logfile=None, prior=get_calculator("gfn1"))
    assert optimizer.run(fmax=0.05, steps=80)
    assert MOVED_AS_A_WHOLE in [choice["reason"] for choice in optimizer.choices]
    forces = np.array([image.get_forces(apply_constraint=False) for image in neb.images])
    energies = np.array([image.get_potential_energy() for image in neb.images])
    positions = np.array([image.positions for image in neb.images])
    computed, _ = band_forces(neb, positions, energies, forces)
    assert np.linalg.norm(computed, axis=2).max() < 0.05


@pytest.mark.parametrize("calculator_torque, moved", [(0.0, False), (0.02, True)])
def test_only_a_net_force_and_torque_of_the_calculator_moves_an_image_as_a_whole(
    calculator_torque, moved
):
    """An image whose NEB force meets fmax but for a torque (0.06 eV/Å on an atom,
    fmax 0.05) is moved as a whole only where its computed forces carry a torque of
    their own as large as the excess (a grid's egg-box): a torque from the band's
    tangent and springs alone would survive every such move."""
    pytest.importorskip("tblite")
    water = molecule("H2O")
    images = [water.copy() for _ in range(3)]
    images[1].positions[0] += 0.1
    for image in images:
        image.calc = get_calculator("gfn2")
    optimizer = BONEB(NEB(images), logfile=None)
    optimizer.run(fmax=0.05, steps=0)  # the endpoints computed, no moving image
    optimizer._fitted()  # the GP on the inverse distances: blind to rigid motions
    positions = np.array([image.positions for image in images])  # (3, 3, 3)
    centred = positions[1] - positions[1].mean(axis=0)
    turn = np.cross([0.0, 0.0, 1.0], centred)  # (3, 3): a rotation about z
    turn /= np.linalg.norm(turn, axis=1).max()
    band = 0.06 * turn[None]  # (1, 3, 3): the NEB force of the moving image
    forces = np.zeros_like(positions)
    forces[1] = calculator_torque * turn
    assert optimizer._rigid_only(positions, forces, band)[0] == moved


def test_the_restart_file_of_another_band_is_refused_and_left_untouched(tmp_path):
    restart = tmp_path / "band.json"
    assert not BONEB(muller_brown_band(), restart=restart, logfile=None).run(fmax=0.05, steps=3)
    written = restart.read_bytes()
    shifted = muller_brown_band()
    shifted.images[-1].positions[0, 1] += 0.1  # another final state
    fewer = muller_brown_band(moving=4)
    for other, words in ((shifted, "other endpoints"), (fewer, "not 4")):
        with pytest.raises(RestartError, match=words):
            BONEB(other, restart=restart, logfile=None)
        assert restart.read_bytes() == written


def test_a_nan_call_keeps_every_call_before_and_the_band_resumes_without_a_repeat(
    muller_brown_run, tmp_path
):
    _, _, calls = muller_brown_run

    class NaNOnTheSixthCall(MullerBrown):
        made = 0

        def calculate(self, atoms=None, properties=("energy",), system_changes=()):
            super().calculate(atoms, properties, system_changes)
            NaNOnTheSixthCall.made += 1
            if NaNOnTheSixthCall.made == 6:
                self.results.update(energy=np.nan, free_energy=np.nan)

    first = Counted(NaNOnTheSixthCall)
    restart = tmp_path / "band.json"
    failing = BONEB(muller_brown_band(calculator=first.make), restart=restart, logfile=None)
    with pytest.raises(FloatingPointError, match="NaN") as raised:
        failing.run(fmax=0.05, steps=60)
    failing.close()
    assert f"restart={str(restart)!r}" in raised.value.__notes__[0]
    second = Counted(MullerBrown)
    resumed = BONEB(muller_brown_band(calculator=second.make), restart=restart, logfile=None)
    assert resumed.run(fmax=0.05, steps=60)
    made = np.array(first.calls[:-1] + second.calls)  # the NaN call alone is made again
    np.testing.assert_allclose(made, np.array(calls), atol=1e-10)


@pytest.mark.parametrize("coincident", [False, True])
def test_an_image_with_a_bad_position_is_refused_by_its_index(coincident):
    neb = muller_brown_band(3)
    for image in neb.images:  # a second atom, 3 Å above the first
        image += Atoms("H", positions=[image.positions[0] + [0.0, 0.0, 3.0]])
    moved = neb.images[2].positions
    moved[1] = moved[0] if coincident else np.nan
    words = "closer than" if coincident else "not a finite number"
    with pytest.raises(ValueError, match=f"image 2: .*{words}"):
        BONEB(neb, logfile=None)


def test_the_band_takes_one_thread_and_gives_the_calculator_its_own(monkeypatch):
    import torch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    seen = []

    class Recording(MullerBrown):
        def calculate(self, atoms=None, properties=("energy",), system_changes=()):
            seen.append(torch.get_num_threads())
            super().calculate(atoms, properties, system_changes)

    class RecordingFIRE(FIRE):  # relaxes the band on the model, within BONEB's step
        def step(self):
            within.append(torch.get_num_threads())
            super().step()

    within = []
    before, given = torch.get_num_threads(), 2  # the caller's, whatever ran before
    torch.set_num_threads(given)
    band = muller_brown_band(3, calculator=Recording)
    optimizer = BONEB(band, logfile=None, band_optimizer=RecordingFIRE)
    assert optimizer.threads == 1
    optimizer.attach(lambda: seen.append(torch.get_num_threads()))
    try:
        optimizer.run(fmax=0.05, steps=3)
    finally:
        torch.set_num_threads(before)
    assert within and set(within) == {1}
    assert set(seen) == {given}  # the calculator and the observers: the caller's threads
    assert BONEB(muller_brown_band(3), logfile=None, threads=2).threads == 2


def test_band_settings_and_their_shortcuts_are_one_setting():
    chosen = BONEB(
        muller_brown_band(3), logfile=None, settings=BandSettings(uncertainty=0.1), maxstep=0.3
    )
    assert (chosen.settings.uncertainty, chosen.settings.max_trust_radius) == (0.1, 0.3)
    assert chosen.trust_radius == BandSettings().trust_radius
    assert BONEB(muller_brown_band(3), logfile=None, maxstep=0.1).trust_radius == 0.1
    for given in ({"settings": BandSettings(max_trust_radius=0.4)}, {"max_trust_radius": 0.4}):
        with pytest.raises(ValueError, match="disagree"):
            BONEB(muller_brown_band(3), logfile=None, maxstep=0.3, **given)


def test_the_smallest_walk_radius_is_a_setting():
    computed, predicted = np.array([[1.0, 0.0, 0.0]]), np.array([[-1.0, 0.0, 0.0]])
    walk = WalkTrustSettings(min_radius=0.05)
    assert adapted_radius(0.06, computed, predicted, 0.05, False, 0.5, walk) == 0.05
    assert adapted_radius(0.06, computed, predicted, 0.05, False, 0.5) == 0.03


@pytest.mark.parametrize("other", ["logfile", "trajectory", "calls_trajectory"])
def test_a_file_of_the_band_named_as_its_restart_file_is_refused_before_any_call(tmp_path, other):
    restart = tmp_path / "band.json"
    assert not BONEB(muller_brown_band(3), restart=restart, logfile=None).run(steps=2)
    written = restart.read_bytes()
    neb = muller_brown_band(3)
    files = {"logfile": None, other: str(restart)}
    with pytest.raises(ValueError, match=f"restart .* and {other} .* are the same file"):
        BONEB(neb, restart=str(restart), **files)
    assert restart.read_bytes() == written
    assert all(not image.calc.results for image in neb.images)


@pytest.mark.parametrize("method", ["aseneb", "improvedtangent"])
def test_the_summary_gives_the_barrier_ase_reads_off_the_band(au_al, method):
    # under aseneb ASE's NEB leaves its endpoints' energies unset: the summary reads
    # every image's, as NEBTools does
    from ase.mep import NEBTools

    initial, final = au_al
    images = [initial.copy() for _ in range(4)] + [final.copy()]
    neb = NEB(images, climb=True, method=method)
    neb.interpolate("idpp", apply_constraint=False)
    for image in images:
        image.calc = EMT()
    search = BONEB(neb, logfile=None)
    assert search.run(fmax=0.05)
    expected, _ = NEBTools(neb.images).get_barrier(fit=False)
    assert f"barrier {expected:.4f} eV" in search.summary()


def test_a_band_wrapped_into_its_cell_is_the_band_ase_sees_through_the_minimum_image():
    # Au hops across the cell's edge on Al(100); every image wrapped into the cell (as
    # read back from POSCAR files) is the same band to ASE's NEB, and to BONEB
    from ase.build import add_adsorbate, fcc100
    from ase.constraints import FixAtoms
    from ase.mep import NEBTools

    initial = fcc100("Al", size=(3, 3, 2), vacuum=5.0)
    spacing = initial.cell[0, 0] / 3
    add_adsorbate(initial, "Au", 1.7, position=(2.5 * spacing, 1.5 * spacing))
    initial.set_constraint(FixAtoms(mask=[tag > 1 for tag in initial.get_tags()]))
    final = initial.copy()
    final[-1].x += spacing
    for end in (initial, final):
        end.calc = EMT()
        BFGS(end, logfile=None).run(fmax=0.01)
    barriers = {}
    for wrapped in (False, True):
        images = [initial.copy() for _ in range(4)] + [final.copy()]
        neb = NEB(images, climb=True, method="improvedtangent")
        neb.interpolate(apply_constraint=False)
        for image in images:
            if wrapped:
                image.wrap()
            image.calc = EMT()
        assert BONEB(neb, logfile=None).run(fmax=0.05, steps=30)
        barriers[wrapped], _ = NEBTools(images).get_barrier(fit=False)
        steps = np.diff([image[-1].x for image in images])  # the adatom along the hop
        assert np.all(np.abs(steps) < spacing)
    assert barriers[True] == pytest.approx(barriers[False], abs=1e-3)
