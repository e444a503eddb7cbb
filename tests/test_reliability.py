"""BOOptimizer never computes a configuration twice and refuses bad input before any call."""

import os
from dataclasses import replace

import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule
from ase.calculators.lj import LennardJones
from ase.constraints import FixBondLength, FixBondLengths, FixCartesian, FixInternals
from ase.filters import StrainFilter

from asebo import BOOptimizer
from asebo.kernels import CartesianKernel, SVDKernel
from asebo.kernels.radial import Matern52, SquaredExponential
from asebo.optimize.observations import Observations
from asebo.optimize.representations import (
    AlignedPositions,
    CartesianPositions,
    InternalCoordinates,
    SVDRepresentation,
)
from asebo.optimize.settings import TrustSettings
from asebo.optimize.stages import force_step
from asebo.optimize.trust import TrustRegion
from calculators import CountingCalculator, get_calculator


class PositionLog(CountingCalculator):
    """Counts calls and keeps the positions of each one."""

    def __init__(self, calc):
        super().__init__(calc)
        self.positions = []

    def calculate(self, atoms=None, properties=("energy",), system_changes=None):
        super().calculate(atoms, properties, system_changes or ["positions"])
        self.positions.append(self.atoms.get_positions())


def rattled(name, seed=0, calc="emt"):
    atoms = molecule(name)
    atoms.rattle(0.1, seed=seed)
    atoms.calc = PositionLog(get_calculator(calc))
    return atoms


def argon_cluster():
    atoms = Atoms("Ar4", positions=[[0, 0, 0], [1.1, 0, 0], [0.55, 0.95, 0], [0.55, 0.32, 0.9]])
    atoms.calc = PositionLog(LennardJones(sigma=1.0, epsilon=1.0, rc=4.0))
    return atoms


def test_no_configuration_is_computed_twice_on_rattled_acetylene():
    atoms = rattled("C2H2", calc="gfn2")
    opt = BOOptimizer(atoms, logfile=None)
    opt.run(fmax=0.05, steps=30)
    computed = np.array(atoms.calc.positions).reshape(atoms.calc.ncalls, -1)
    assert len(np.unique(computed, axis=0)) == atoms.calc.ncalls == len(opt.energies)
    np.testing.assert_array_equal(computed.reshape(-1, 2 + 2, 3), opt.positions_seen)


def test_a_configuration_already_observed_is_answered_without_a_call():
    atoms = argon_cluster()
    opt = BOOptimizer(atoms, logfile=None, prior="max")
    opt.run(fmax=0.01, steps=3)
    calls = atoms.calc.ncalls
    atoms.set_positions(opt.positions_seen[1])
    gradient = opt.optimizable.get_gradient()
    assert atoms.calc.ncalls == calls
    np.testing.assert_array_equal(gradient, -opt.forces[1].ravel())
    assert opt.optimizable.get_value() == opt.energies[1]


def test_the_step_along_the_forces_never_returns_to_a_computed_configuration():
    atoms = argon_cluster()
    opt = BOOptimizer(atoms, logfile=None, prior="max", trust_radius=0.05)
    opt.run(fmax=0.01, steps=1)
    context = replace(opt.engine.step_context(opt.observations, opt.trust, 0.01), best=0)
    first = force_step(context, 0.05)
    opt.observations.append(first, 0.0, np.zeros((4, 3)))
    second = force_step(context, 0.05)
    forces = opt.forces[0]
    direction = forces / np.linalg.norm(forces, axis=1).max()
    # the first step is one trust radius long; the second, the first being computed, half
    np.testing.assert_allclose(first - opt.positions_seen[0], 0.05 * direction, atol=1e-12)
    np.testing.assert_allclose(second - opt.positions_seen[0], 0.025 * direction, atol=1e-12)


def test_observations_find_a_configuration_within_the_tolerance_only():
    record = Observations(numbers=[18, 18])
    a = np.array([[0.0, 0, 0], [1.0, 0, 0]])
    record.append(a, -1.0, np.zeros((2, 3)))
    record.append(a + 0.5, -2.0, np.zeros((2, 3)))
    assert record.find(a + 0.5) == 1
    assert record.find(a + 1e-12) == 0
    assert record.find(a + 1e-8) is None
    assert record.find(a + 1e-8, tolerance=1e-6) == 0
    assert record.best() == 1


def test_trust_region_grows_after_a_good_prediction_and_shrinks_after_a_bad_one():
    region = TrustRegion(0.1, maxstep=0.15)
    assert region.after(best=0.0, predicted=-1.0, energy=-0.9).radius == 0.15  # capped
    assert region.after(best=0.0, predicted=-1.0, energy=0.1).radius == 0.05  # went up
    assert region.after(best=0.0, predicted=-1.0, energy=-0.3).radius == 0.1  # fair
    FLOOR, FORCE_STEP = TrustSettings().floor, TrustSettings().force_step
    assert TrustRegion(1.5e-3, 0.2).after(0.0, -1.0, 1.0).radius == FLOOR
    assert region.radius == 0.1  # unchanged: after() returns a new region
    assert TrustRegion(FLOOR, 0.2).for_force_step().radius == FORCE_STEP
    assert TrustRegion(0.1, 0.2).for_force_step().radius == 0.1
    assert TrustRegion(FLOOR, 0.01).for_force_step().radius == 0.01


def test_temporary_restart_name_is_unique_to_the_writer(tmp_path):
    restart = tmp_path / "bo.json"
    # a fixed temporary name would collide with this folder (or another process)
    (tmp_path / "bo.json.tmp").mkdir()
    atoms = argon_cluster()
    BOOptimizer(atoms, restart=str(restart), logfile=None, prior="max").run(fmax=0.01, steps=2)
    # no temporary file left; the lock file stays, locked by no process
    assert sorted(os.listdir(tmp_path)) == ["bo.json", "bo.json.lock", "bo.json.tmp"]
    assert len(Observations.load(atoms.numbers, str(restart))) == atoms.calc.ncalls == 3


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"maxstep": 0}, ValueError, "maxstep must be a finite number > 0, got 0.0"),
        ({"maxstep": -0.1}, ValueError, "maxstep must be a finite number > 0"),
        ({"trust_radius": 0.0}, ValueError, "trust_radius must be a finite number > 0"),
        ({"trust_radius": np.inf}, ValueError, "trust_radius must be a finite number > 0"),
        ({"kappa": np.nan}, ValueError, "kappa must be a finite number, got nan"),
        ({"kappa": -np.inf}, ValueError, "kappa must be a finite number, got -inf"),
        ({"kappa": "big"}, TypeError, "kappa must be a number, got 'big'"),
        ({"prior": np.nan}, ValueError, "prior must be .* a finite number of eV, got nan"),
        ({"prior": True}, ValueError, "prior must be .* got True"),
        ({"prior": "gfn2"}, ValueError, "prior must be an ASE calculator, lindh, max, mean"),
        ({"recentre": np.nan}, ValueError, "recentre must be an energy >= 0"),
    ],
)
def test_bad_arguments_fail_at_construction_before_any_call(options, error, message):
    atoms = rattled("H2O")
    with pytest.raises(error, match=message):
        BOOptimizer(atoms, logfile=None, **options)
    assert atoms.calc.ncalls == 0


def test_unusable_file_names_fail_at_construction_before_any_call(tmp_path):
    atoms = rattled("H2O")
    with pytest.raises(ValueError, match="restart .* is a folder: pass a file name inside it"):
        BOOptimizer(atoms, logfile=None, restart=str(tmp_path))
    with pytest.raises(ValueError, match="the folder .*missing does not exist"):
        BOOptimizer(atoms, logfile=None, trajectory=str(tmp_path / "missing" / "bo.traj"))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(PermissionError, match="trajectory .* cannot be written"):
            BOOptimizer(atoms, logfile=None, trajectory=str(locked / "bo.traj"))
    finally:
        locked.chmod(0o700)
    assert atoms.calc.ncalls == 0


def test_read_only_trajectory_file_fails_at_construction(tmp_path):
    atoms = rattled("H2O")
    trajectory = tmp_path / "bo.traj"
    trajectory.write_text("")
    trajectory.chmod(0o400)
    if os.access(trajectory, os.W_OK):
        pytest.skip("running as a user who can write anywhere")
    with pytest.raises(PermissionError, match="trajectory .* cannot be written"):
        BOOptimizer(atoms, logfile=None, trajectory=str(trajectory))
    assert atoms.calc.ncalls == 0


@pytest.mark.parametrize(
    "constraint",
    [
        FixBondLength(0, 1),
        FixBondLengths([(0, 1), (0, 2)]),
        FixInternals(bonds=[(0.97, (0, 1))]),
    ],
)
def test_constraints_that_couple_coordinates_are_refused_before_any_call(constraint):
    atoms = rattled("H2O")
    atoms.set_constraint(constraint)
    with pytest.raises(
        TypeError,
        match=f"cannot honour the constraint "
        f"{type(constraint).__name__}.*FixAtoms, FixCartesian, FixedPlane, FixedLine and "
        "FixSymmetry",
    ):
        BOOptimizer(atoms, logfile=None)
    assert atoms.calc.ncalls == 0


def test_a_filter_it_cannot_follow_is_refused_before_any_call():
    atoms = rattled("H2O")
    atoms.cell = [8, 8, 8]
    atoms.pbc = True
    with pytest.raises(TypeError, match="got StrainFilter: use one of these"):
        BOOptimizer(StrainFilter(atoms), logfile=None)
    assert atoms.calc.ncalls == 0


def test_fix_cartesian_holds_its_coordinates_and_converges_like_bfgs():
    """FixCartesian takes the Cartesian kernel, which sees the fixed axes."""
    from ase.optimize import BFGS

    atoms = rattled("H2O", seed=2, calc="gfn2")
    atoms.set_constraint(FixCartesian([0, 1], mask=(False, False, True)))
    start = atoms.get_positions()
    reference = atoms.copy()
    reference.calc = CountingCalculator(get_calculator("gfn2"))
    assert BFGS(reference, logfile=None).run(fmax=0.02, steps=200)
    opt = BOOptimizer(atoms, logfile=None)
    assert isinstance(opt.representation, CartesianPositions)
    assert opt.run(fmax=0.02, steps=60)
    np.testing.assert_array_equal(atoms.positions[[0, 1], 2], start[[0, 1], 2])
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), abs=2e-3)
    assert atoms.calc.ncalls <= reference.calc.ncalls


def test_fix_cartesian_with_the_svd_kernel_is_refused_before_any_call():
    atoms = rattled("H2O")
    atoms.set_constraint(FixCartesian([0], mask=(False, False, True)))
    with pytest.raises(ValueError, match="FixCartesian .* use kernel='cartesian'"):
        BOOptimizer(atoms, logfile=None, kernel="svd")
    assert atoms.calc.ncalls == 0


NEAR_LINEAR_G2 = {"C2H2", "NCCN", "HCN", "CO2", "OCS", "CS2", "N2O", "CCH"}


def test_near_linear_molecules_of_g2_are_told_apart_from_bent_ones():
    from ase.collections import g2

    from asebo.model.straightness import is_near_linear

    found = set()
    for name in g2.names:
        atoms = g2[name]
        if len(atoms) < 3:
            continue
        atoms.rattle(0.1, seed=0)
        if is_near_linear(atoms.positions):
            found.add(name)
    assert found == NEAR_LINEAR_G2


def test_near_linear_molecules_take_the_anisotropic_kernel_not_aligned():
    acetylene, water = rattled("C2H2"), rattled("H2O")
    opt = BOOptimizer(acetylene, logfile=None)
    assert type(opt.representation) is AlignedPositions and opt.recentre == 0.3
    assert opt.gp.trend == opt.settings.model.trend == 0.0
    opt.run(fmax=0.05, steps=1)
    assert not opt.gp.metric.align
    assert isinstance(BOOptimizer(water, logfile=None).representation, InternalCoordinates)
    opt = BOOptimizer(water, logfile=None, kernel="anisotropic")
    opt.run(fmax=0.05, steps=1)
    assert opt.gp.metric.align
    svd = BOOptimizer(acetylene, logfile=None, kernel="svd")
    assert isinstance(svd.representation, SVDRepresentation)
    with pytest.raises(ValueError, match="kernel='anisotropic'"):
        BOOptimizer(acetylene, logfile=None, kernel="internal")


def test_the_optimizer_kernels_map_to_gp_kernel_objects():
    water = rattled("H2O")
    for name, expected in (("internal", CartesianKernel), ("anisotropic", CartesianKernel)):
        kernel = BOOptimizer(water, logfile=None, kernel=name).gp.kernel
        assert type(kernel) is expected and isinstance(kernel.radial, SquaredExponential)
    options = {"proper": False, "radial": "matern52", "gamma": 3.0}
    opt = BOOptimizer(water, logfile=None, kernel="svd", gp_options=options)
    kernel = opt.gp.kernel
    assert isinstance(kernel, SVDKernel) and not kernel.proper
    assert isinstance(kernel.radial, Matern52)
    assert (opt.gp.trend, opt.gp.prior_curvature, opt.gp.gamma) == (0.0, 0.0, 3.0)
    assert opt.settings.model.gp_options == options
    opt.run(fmax=0.05, steps=1)
    assert opt.gp.kernel is kernel
    own = CartesianKernel(radial="matern52")
    opt = BOOptimizer(water, logfile=None, kernel="svd", gp_options={"kernel": own})
    assert opt.gp.kernel is own
    with pytest.raises(ValueError, match="'cartesian' kernel takes no proper"):
        BOOptimizer(water, logfile=None, kernel="internal", gp_options={"proper": False})


@pytest.mark.parametrize(
    "options, match",
    [
        ({"gamma": -1.0}, "gamma must be a finite number > 0"),
        ({"gamma": float("nan")}, "gamma must be a finite number > 0"),
        ({"gamma": 0}, "gamma must be a finite number > 0"),
        ({"energy_noise": -2e-3}, "energy_noise must be a finite number >= 0"),
        ({"gradient_noise": "small"}, "gradient_noise must be a finite number >= 0"),
        ({"gamma_bounds": (5.0, 1.0)}, "gamma_bounds must be two increasing positive"),
        ({"max_size": 0}, "max_size must be a whole number >= 1"),
        ({"hyper_window": 2.5}, "hyper_window must be a whole number >= 2"),
        ({"cg_tolerance": 0.0}, "cg_tolerance must be a finite number > 0"),
        ({"nonsense": 1}, "'nonsense' not an option of EnergyForceGP; its options are"),
        ({"prior": "max"}, "pass prior= to BOOptimizer"),
        ({"proper": "nonsense"}, "proper must be True or False"),
    ],
)
def test_gp_options_that_cannot_be_are_refused_before_any_call(options, match):
    water = rattled("H2O")
    kernel = "svd" if "proper" in options else "internal"
    with pytest.raises(ValueError, match=match):
        BOOptimizer(water, logfile=None, kernel=kernel, gp_options=options)
    assert water.calc.ncalls == 0


def test_lindh_prior_is_smooth_across_the_straight_geometry_of_a_near_linear_bend():
    """A bend rattled to ~172 deg is given 180 deg: no cusp where the GP must fit."""
    from asebo.model.lindh import LindhModel
    from asebo.model.priors import RecentredLindh

    atoms = molecule("C2H2")
    atoms.rattle(0.05, seed=0)
    prior = RecentredLindh(atoms, recentre=0.3)
    prior.for_observations(atoms.positions[None], np.array([0.0]))
    straight = molecule("C2H2").positions
    across = np.zeros((4, 3))
    across[3, 0] = 1.0  # one hydrogen across the axis
    h = 1e-4
    for model, cusp in ((prior.model, False), (LindhModel(atoms.positions, atoms.numbers), True)):
        energy = [model.energy_and_forces(straight + t * across)[0] for t in (-h, 0.0, h)]
        slope_right, slope_left = (energy[2] - energy[1]) / h, (energy[1] - energy[0]) / h
        # smooth: the one-sided slopes agree (both ~0); a cusp: they differ by O(1) eV/Å
        assert (abs(slope_right - slope_left) > 0.1) == cusp


@pytest.mark.parametrize(
    "name, seed",
    [("C2H2", 0), ("C2H2", 1), ("C2H2", 2), ("CS2", 0), ("OCS", 0), ("CH3CO", 0), ("CH3ONO", 0)],
)
def test_hardest_rattled_g2_molecules_converge_within_three_times_lbfgs(name, seed):
    """Near-linear molecules and the largest ratios of `asebo bench g2`."""
    from ase.optimize import LBFGS

    atoms = rattled(name, seed=seed, calc="gfn2")
    reference = atoms.copy()
    reference.calc = CountingCalculator(get_calculator("gfn2"))
    assert LBFGS(reference, logfile=None).run(fmax=0.05, steps=200)
    budget = 3 * reference.calc.ncalls
    assert BOOptimizer(atoms, logfile=None).run(fmax=0.05, steps=budget - 1)
    assert atoms.calc.ncalls <= budget
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), abs=2e-3)
