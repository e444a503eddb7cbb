"""The model's Hessian at a configuration: its curvatures, their uncertainty, the
vibrations it gives, and the line in the log at convergence."""

import copy
import io

import numpy as np
import pytest
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter

import asebo.optimize.model_hessian as model_hessian
from asebo import BOOptimizer
from asebo.benchmarks._endpoint_audit import finite_difference_hessian, frequencies, imaginary_modes
from asebo.benchmarks._relaxation_table import DATA_DIR
from asebo.benchmarks.vibrations import zero_point_energy
from asebo.model.priors import AnchoredOffset
from asebo.optimize.model_hessian import (
    descent_along,
    internal_basis,
    mass_weighted_internal_basis,
    model_curvature,
    posterior_hessian,
    without_rigid_motions,
)
from asebo.optimize.rigid import rigid_modes
from calculators import get_calculator


@pytest.fixture(scope="module")
def water_run():
    atoms = molecule("H2O")
    atoms.rattle(0.05, seed=1)
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None)
    assert optimizer.run(fmax=0.01)
    return optimizer


def test_hessian_is_the_jacobian_of_the_posterior_gradient(water_run):
    gp = water_run.fit_model()
    x = water_run.observations.positions[water_run.observations.best()]
    free = np.ones(x.shape, dtype=bool)
    hessian = posterior_hessian(gp, x, free)  # (9, 9)
    step = 1e-3  # ten times the module's: agreement shows the differences are converged
    for index in (0, 4, 8):
        moved = [x.copy(), x.copy()]
        moved[0].flat[index] += step
        moved[1].flat[index] -= step
        column = (
            gp.predict(moved[0], return_gradient=True)[1]
            - gp.predict(moved[1], return_gradient=True)[1]
        ).ravel() / (2 * step)
        np.testing.assert_allclose(hessian[index], column, atol=1e-3 * np.abs(hessian).max())
    np.testing.assert_allclose(hessian, hessian.T)


@pytest.mark.parametrize(
    "kernel, prior",
    [
        ("internal", None),
        ("anisotropic", None),
        ("svd", None),
        ("cartesian", None),
        ("internal", "gfn1"),
        ("periodic", None),
    ],
)
def test_hessian_matches_the_posterior_gradient_for_every_kernel_and_prior(kernel, prior):
    if kernel == "periodic":
        from ase.build import fcc111

        atoms = fcc111("Cu", (2, 2, 2), vacuum=5.0)
        atoms.set_constraint(FixAtoms(indices=range(4)))
        atoms.rattle(0.05, seed=0)
        atoms.calc = EMT()
    else:
        atoms = molecule("H2O")
        atoms.rattle(0.05, seed=2)
        atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(
        atoms,
        logfile=None,
        kernel=kernel,
        prior=None if prior is None else get_calculator(prior),
    )
    optimizer.run(fmax=0.05, steps=3)
    gp = optimizer.fit_model()
    x = optimizer.observations.positions[optimizer.observations.best()]
    free = np.ones(x.shape, dtype=bool)
    for constraint in atoms.constraints:
        free[constraint.index] = False  # the slab's bottom layer
    hessian = posterior_hessian(gp, x, free)
    step = 1e-3
    for index in np.flatnonzero(free.ravel())[[0, -1]]:
        moved = [x.copy(), x.copy()]
        moved[0].flat[index] += step
        moved[1].flat[index] -= step
        ends = [gp.predict(end, return_gradient=True)[1] for end in moved]
        column = (ends[0] - ends[1]).ravel() / (2 * step) * free.ravel()
        np.testing.assert_allclose(hessian[index], column, atol=2e-3 * np.abs(hessian).max())


def test_a_prior_calculators_noise_stays_out_of_the_hessian():
    # GFN1-xTB's forces carry the noise of its SCF, up to about 1e-4 eV/Å here: a
    # difference over 1e-4 Å put errors of 0.48 eV/Å² into ethanol's Hessian against
    # one over 0.01 Å; over NOISY_STEP they are 0.013 eV/Å²
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.05, seed=3)
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None, prior=get_calculator("gfn1"))
    optimizer.run(fmax=0.05, steps=2)
    gp = optimizer.fit_model()
    x = optimizer.observations.positions[optimizer.observations.best()]
    hessian = posterior_hessian(gp, x, np.ones(x.shape, dtype=bool))
    step = 1e-2
    for index in range(0, x.size, 3):
        moved = [x.copy(), x.copy()]
        moved[0].flat[index] += step
        moved[1].flat[index] -= step
        ends = [gp.predict(end, return_gradient=True)[1] for end in moved]
        column = (ends[0] - ends[1]).ravel() / (2 * step)
        np.testing.assert_allclose(hessian[index], column, atol=0.05)


def test_held_coordinates_have_no_rows_and_translations_no_curvature(water_run):
    gp = water_run.fit_model()
    x = water_run.observations.positions[water_run.observations.best()]
    free = np.ones(x.shape, dtype=bool)
    hessian = posterior_hessian(gp, x, free)
    translations = rigid_modes(x)[:, :3]  # (9, 3): the invariant kernel cannot bend along them
    assert np.abs(hessian @ translations).max() < 1e-4 * np.abs(hessian).max()
    free[0] = False
    held = posterior_hessian(gp, x, free)
    assert not held[:3].any() and not held[:, :3].any()
    # a forward difference over 1e-6 Å of gradients that round at 1e-16 of their size:
    # the same in both but for that rounding over the step
    scale = np.abs(hessian).max()
    np.testing.assert_allclose(held[3:, 3:], hessian[3:, 3:], rtol=0, atol=1e-8 * scale)


def test_one_fit_serves_a_step_and_its_hessian_is_computed_once(water_run):
    gp = water_run.fit_model()
    weights = gp._alpha.clone()
    x = water_run.observations.positions[water_run.observations.best()]
    free = np.ones(x.shape, dtype=bool)
    hessian = posterior_hessian(gp, x, free)
    computed = len(gp.hessians_)
    hessian[0, 0] = np.nan  # the caller's copy: the memo keeps its own
    again = posterior_hessian(gp, x, free)
    assert len(gp.hessians_) == computed and np.isfinite(again).all()
    assert len(water_run.fit_model().hessians_) == computed  # no new observation: no refit
    np.testing.assert_array_equal(again, model_hessian._differenced_hessian(gp, x, free))
    positions, energies, forces = water_run.observations.arrays()
    refit = gp.fit(positions[:-1], energies[:-1], forces[:-1])  # another fit empties it
    assert refit.hessians_ == {}
    assert not np.allclose(posterior_hessian(refit, x, free), again, rtol=1e-6, atol=0)
    gp.fit(positions, energies, forces)
    np.testing.assert_array_equal(gp._alpha, weights)  # a refit of the same data: same fit


def test_bases_are_orthonormal_and_orthogonal_to_the_rigid_motions():
    x = molecule("CH3CH2OH").positions
    basis = internal_basis(x, np.ones(x.shape, dtype=bool))
    assert basis.shape == (27, 21)
    np.testing.assert_allclose(basis.T @ basis, np.eye(21), atol=1e-12)
    assert np.abs(basis.T @ rigid_modes(x)).max() < 1e-10
    line = molecule("CO2").positions
    assert internal_basis(line, np.ones(line.shape, dtype=bool)).shape == (9, 4)
    masses = molecule("CH3CH2OH").get_masses()
    weighted = mass_weighted_internal_basis(x, masses)
    weights = np.repeat(np.sqrt(masses), 3)
    assert np.abs(weighted.T @ (rigid_modes(x) * weights[:, None])).max() < 1e-10


@pytest.mark.parametrize(
    "held, rotations, size",
    [([0], True, 21), ([0, 1], True, 20), ([0, 1, 2], True, 18), ([0], False, 24)],
    ids=["one atom", "two atoms", "three atoms", "one atom, periodic"],
)
def test_a_molecule_held_by_its_atoms_keeps_the_rotations_about_them_out(held, rotations, size):
    # held by one atom, ethanol still turns about it (three rotations), by two about
    # their axis (one); three atoms off one line, or a periodic cell, hold it still
    x = molecule("CH3CH2OH").positions  # (9, 3)
    free = np.ones(x.shape, dtype=bool)
    free[held] = False
    basis = internal_basis(x, free, rotations)
    assert basis.shape == (27, size)
    np.testing.assert_allclose(basis.T @ basis, np.eye(size), atol=1e-12)
    assert np.abs(basis.reshape(9, 3, size)[held]).max() == 0.0
    if rotations:
        for axis in np.eye(3):  # every rotation about the first atom held
            turned = np.cross(axis, x - x[held[0]])  # (9, 3)
            if np.abs(turned[held]).max() < 1e-12:
                assert np.abs(basis.T @ turned.ravel()).max() < 1e-10
    masses = molecule("CH3CH2OH").get_masses()
    weighted = mass_weighted_internal_basis(x, masses, rotations, free)
    assert weighted.shape == (27, size)


def test_rigid_projection_keeps_the_vibrations_of_an_invariant_energy():
    water = molecule("H2O")
    hessian = finite_difference_hessian(water, get_calculator("gfn2"))
    projected = without_rigid_motions(hessian, water.positions, water.get_masses())
    np.testing.assert_allclose(
        frequencies(projected, water), frequencies(hessian, water), rtol=1e-6, atol=1e-3
    )


def test_curvature_uncertainty_does_not_depend_on_the_probe(water_run, monkeypatch):
    # the d⁴ term of the variance's rise is a quarter of the curvature's variance
    gp = water_run.fit_model()
    x = water_run.observations.positions[water_run.observations.best()]
    free = np.ones(x.shape, dtype=bool)
    found = []
    for probe in (0.0025, 0.005):
        monkeypatch.setattr(model_hessian, "CURVATURE_PROBE", probe)
        found.append(model_curvature(gp, x, free).uncertainties)
    np.testing.assert_allclose(found[0], found[1], rtol=0.15)  # water's terms in d⁶
    assert (found[0] > 0).all()


def test_a_curvatures_std_is_resolved_where_the_observations_carry_noise(monkeypatch):
    """Methylamine, from its Baker start with the nitrogen 0.05 Å out of the plane of
    its neighbours, ends where the variance's rise 0.01 Å along the softest mode is
    below zero (its d² term: the slope's variance and the value's covariance with the
    curvature); read at two distances, the std is the same from 0.0025 to 0.01 Å."""
    from ase.io import read

    atoms = read(DATA_DIR / "baker" / "07_methylamine.xyz")
    atoms.positions[0, 2] += 0.05  # the nitrogen; its neighbours lie in the plane z = 0
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None)
    assert optimizer.run(fmax=0.05)
    gp = optimizer.fit_model()
    x = atoms.get_positions()
    mode = model_curvature(gp, x, np.ones(x.shape, dtype=bool)).modes[:1]
    offsets = 0.01 * np.array([1.0, -1.0])[:, None, None] * mode.reshape(1, *x.shape)
    variances = gp.predict(np.concatenate([x[None], x + offsets]), return_std=True)[1] ** 2
    assert 0.5 * (variances[1] + variances[2]) < variances[0]  # one distance reads zero
    stds = []
    for probe in (0.0025, 0.005, 0.01):
        monkeypatch.setattr(model_hessian, "CURVATURE_PROBE", probe)
        stds.append(model_hessian.curvature_uncertainties(gp, x, mode)[0])
    assert stds[1] > 0.0
    np.testing.assert_allclose(stds, stds[1], rtol=0.1)


def test_the_convergence_check_probes_the_lowest_and_non_positive_curvatures_only(water_run):
    gp = water_run.fit_model()
    x = water_run.observations.positions[water_run.observations.best()]
    free = np.ones(x.shape, dtype=bool)
    every = model_curvature(gp, x, free)
    few = model_curvature(gp, x, free, every_uncertainty=False)
    np.testing.assert_array_equal(few.curvatures, every.curvatures)
    probed = (every.curvatures <= 0) | (np.arange(len(every.curvatures)) == 0)
    # the probes come in other batches: the variances differ in their last digits
    np.testing.assert_allclose(few.uncertainties[probed], every.uncertainties[probed], rtol=1e-6)
    assert np.isnan(few.uncertainties[~probed]).all() and probed.sum() < len(probed)
    assert few.summary() == every.summary()
    np.testing.assert_array_equal(few.negative, every.negative)


def test_an_anchored_offset_is_the_residual_of_its_observation(water_run):
    gp = water_run.fit_model()
    positions, energies, _ = water_run.observations.arrays()
    prior_energies, gradients = gp.prior.energies_and_gradients(positions)
    anchored = AnchoredOffset(gp.prior, 1)
    assert anchored.offset(energies, prior_energies) == pytest.approx(
        energies[1] - prior_energies[1], abs=1e-12
    )
    np.testing.assert_array_equal(anchored.energies_and_gradients(positions)[1], gradients)
    assert anchored.constant == gp.prior.constant
    assert anchored.is_calculator == gp.prior.is_calculator


def test_ethanols_hessian_is_taken_with_no_bump_at_its_configuration():
    """A three-call run from the Baker start. About the mean residual, the lowest
    configuration's residual is negative and the stationary kernel's bump there
    stiffens every direction the run never moved in; anchored there, the model's
    zero-point energy comes closer to the target's, the optimizer's own GP is left as
    it was, and the check at convergence reads that GP, the one that steps."""
    from ase.io import read

    atoms = read(DATA_DIR / "baker" / "08_ethanol.xyz")
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log)
    assert optimizer.run(fmax=0.05)
    x = optimizer.observations.positions[optimizer.observations.best()]
    gp = optimizer.fit_model()
    before = gp.predict(x[None] + 0.05, return_gradient=True)
    anchored = optimizer.hessian()
    stepping = model_curvature(gp, x, np.ones(x.shape, dtype=bool))
    mean_offset = stepping.hessian
    logged = [line for line in log.getvalue().splitlines() if "lowest model curvature" in line]
    assert f"lowest model curvature {stepping.curvatures[0]:.3g} " in logged[-1]
    assert optimizer.model_curvature().curvatures[0] < stepping.curvatures[0] - 0.1
    after = gp.predict(x[None] + 0.05, return_gradient=True)
    for one, other in zip(before, after):
        np.testing.assert_array_equal(one, other)
    endpoint = atoms.copy()
    endpoint.positions = x
    target = zero_point_energy(
        frequencies(finite_difference_hessian(endpoint, get_calculator("gfn2")), endpoint)
    )
    errors = [
        abs(zero_point_energy(frequencies(h, endpoint)) / target - 1)
        for h in (anchored, mean_offset)
    ]
    assert errors[0] < errors[1]


def test_benzenes_hessian_takes_a_prior_whose_bends_on_multiple_bonds_are_capped():
    """Two calls from the Baker start. The steps' Lindh prior stiffens every bend on
    benzene's short C–C bonds; the Hessian given as a result is the GP refitted under
    the same model with those bends capped (``Prior.for_hessian``), and its zero-point
    energy is then within 2 % of the target's, closer than under the steps' prior."""
    from ase.io import read

    atoms = read(DATA_DIR / "baker" / "06_benzene.xyz")
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None)
    assert optimizer.run(fmax=0.05)
    best = optimizer.observations.best()
    x = optimizer.observations.positions[best]
    gp = optimizer.fit_model()
    steps_prior = copy.copy(gp)
    steps_prior.prior = AnchoredOffset(gp.prior, best)
    steps_prior.fit_gamma, steps_prior.gamma = False, gp.gamma_
    steps_prior.fit(*optimizer.observations.arrays())
    uncapped = model_curvature(steps_prior, x, np.ones(x.shape, dtype=bool)).hessian
    endpoint = atoms.copy()
    endpoint.positions = x
    target = zero_point_energy(
        frequencies(finite_difference_hessian(endpoint, get_calculator("gfn2")), endpoint)
    )
    capped, steps = (
        abs(zero_point_energy(frequencies(h, endpoint)) / target - 1)
        for h in (optimizer.hessian(), uncapped)
    )
    assert capped < 0.02 < steps


def test_water_vibrations_match_the_target_within_the_documented_tolerance(water_run):
    vibrations = water_run.vibrations()
    found = vibrations.get_frequencies()
    assert np.abs(found[:6]).max() < 1e-3  # rigid motions projected out
    endpoint = molecule("H2O")
    endpoint.positions = water_run.observations.positions[water_run.observations.best()]
    target = frequencies(finite_difference_hessian(endpoint, get_calculator("gfn2")), endpoint)
    np.testing.assert_allclose(found[6:].real, target, rtol=0.05)
    zero_point = 0.5 * target.sum() * 1.239842e-4  # cm⁻¹ to eV
    assert vibrations.get_zero_point_energy() == pytest.approx(zero_point, rel=0.02)


def test_converged_log_names_the_lowest_curvature_and_a_minimum():
    atoms = molecule("H2O")
    atoms.rattle(0.05, seed=1)
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    BOOptimizer(atoms, logfile=log).run(fmax=0.01)
    lines = [line for line in log.getvalue().splitlines() if "at convergence" in line]
    assert len(lines) == 1 and "no negative curvature in the model" in lines[0]


def test_slab_vibrations_take_the_free_atoms_only():
    from ase.build import fcc111

    slab = fcc111("Cu", (2, 2, 2), vacuum=5.0)
    slab.set_constraint(FixAtoms(indices=range(4)))
    slab.rattle(0.03, seed=0)
    slab.calc = EMT()
    optimizer = BOOptimizer(slab, logfile=None)
    assert optimizer.run(fmax=0.02)
    vibrations = optimizer.vibrations()
    assert list(vibrations.get_indices()) == [4, 5, 6, 7]
    assert optimizer.hessian().shape == (24, 24) and not optimizer.hessian()[:12].any()


def test_hessian_is_refused_before_a_run_and_under_a_cell_filter():
    atoms = bulk("Cu", cubic=True)
    atoms.calc = EMT()
    with pytest.raises(RuntimeError, match="no configuration computed yet"):
        BOOptimizer(atoms, logfile=None).hessian()
    with pytest.raises(ValueError, match="cell filter"):
        BOOptimizer(FrechetCellFilter(atoms), logfile=None).hessian()


def test_a_calculator_prior_enters_the_converged_curvature():
    atoms = molecule("CH3OH")
    atoms.rattle(0.05, seed=0)
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    prior = get_calculator("gfn1")
    optimizer = BOOptimizer(atoms, logfile=log, prior=prior)
    assert optimizer.run(fmax=0.01)
    assert "at convergence, lowest model curvature" in log.getvalue()
    endpoint = atoms.copy()
    found = frequencies(optimizer.hessian(), endpoint)
    target = frequencies(finite_difference_hessian(endpoint, get_calculator("gfn2")), endpoint)
    np.testing.assert_allclose(found[-6:], target[-6:], rtol=0.05)  # the stretches


def planar_ammonia_and_two_pyramids():
    """Planar NH3 at its stationary point (a saddle), and two frames with the nitrogen
    0.1 Å out of plane on either side, each with GFN2-xTB's energy and forces."""
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.optimize import BFGS

    planar = molecule("NH3")
    planar.positions[:, 2] = 0.0
    planar.calc = get_calculator("gfn2")
    BFGS(planar, logfile=None).run(fmax=1e-3)  # the forces keep the plane
    frames = []
    for height in (0.1, -0.1):
        frame = planar.copy()
        frame.positions[0, 2] += height
        frame.calc = get_calculator("gfn2")
        energy, forces = frame.get_potential_energy(), frame.get_forces()
        frame.calc = SinglePointCalculator(frame, energy=energy, forces=forces)
        frames.append(frame)
    planar = planar.copy()
    planar.calc = get_calculator("gfn2")
    return planar, frames


def test_converged_forces_on_a_saddle_the_model_sees_lead_on_to_the_minimum():
    planar, frames = planar_ammonia_and_two_pyramids()
    assert np.abs(planar.get_forces()).max() < 1e-3  # converged where it starts
    log = io.StringIO()
    optimizer = BOOptimizer(planar, logfile=log, observations=frames)
    assert optimizer.run(fmax=0.05)
    assert optimizer.reasons[0] == "curvature"
    assert "curves down" in log.getvalue()
    assert abs(planar.positions[0, 2] - planar.positions[1:, 2].mean()) > 0.3  # pyramidal
    assert imaginary_modes(planar, get_calculator("gfn2")) == []


def test_a_step_along_a_negative_curvature_goes_to_the_models_lowest_energy_on_it():
    planar, frames = planar_ammonia_and_two_pyramids()
    optimizer = BOOptimizer(planar, logfile=None, observations=frames)
    gp = optimizer.fit_model()
    x = planar.positions
    curvature = model_curvature(gp, x, np.ones(x.shape, dtype=bool))
    mode = curvature.modes[0]  # (3n,): the inversion, curving down
    assert curvature.curvatures[0] < 0.0
    found = descent_along(gp, x, mode, radius=0.2)
    direction = mode.reshape(x.shape)
    scale = 0.2 / np.linalg.norm(direction, axis=1).max()
    line = x[None] + np.linspace(-scale, scale, 201)[:, None, None] * direction[None]
    energies = gp.predict(line)  # (201,)
    assert gp.predict(found[None])[0] < energies.min() + 1e-3  # its grid is 41 points
    assert energies.min() < gp.predict(x[None])[0] - 0.05  # down the inversion
    step = (found - x).ravel()
    assert abs(step @ mode) == pytest.approx(np.linalg.norm(step))
    assert np.linalg.norm(found - x, axis=1).max() <= 0.2 + 1e-12


def test_a_prior_that_knows_a_symmetric_rotor_saddle_leads_off_it():
    """Methanol's methyl eclipsed, mirror plane kept: every gradient keeps the plane,
    and only the prior knows the torsion curves down. Under a GFN1-xTB prior the
    curvature check steps along it, though the model cannot vouch for the drop."""
    from ase.optimize import LBFGS

    from asebo.benchmarks._symmetric_starts import methyl_turned_about_its_axis
    from asebo.optimize.symmetry import symmetry_operations

    atoms = methyl_turned_about_its_axis("CH3OH")
    assert symmetry_operations(atoms.positions, atoms.numbers)
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log, prior=get_calculator("gfn1"))
    assert optimizer.run(fmax=0.05)
    assert "curvature" in optimizer.reasons
    assert imaginary_modes(atoms, get_calculator("gfn2")) == []
    staggered = molecule("CH3OH")
    staggered.calc = get_calculator("gfn2")
    LBFGS(staggered, logfile=None).run(fmax=0.005)
    assert atoms.get_potential_energy() - staggered.get_potential_energy() < 0.005


def test_curvature_steps_are_limited_by_the_setting():
    from asebo.optimize.settings import SpecialCases

    planar, frames = planar_ammonia_and_two_pyramids()
    log = io.StringIO()
    optimizer = BOOptimizer(
        planar,
        logfile=log,
        observations=frames,
        special_cases=SpecialCases(curvature_steps=0),
    )
    assert optimizer.run(fmax=0.05) and optimizer.nsteps == 0  # stops on the saddle
    # the two pyramids computed are lower: the verdict is the saddle's
    assert "a saddle point by the model" in log.getvalue()


def test_a_resumed_run_counts_the_curvature_steps_taken_before(tmp_path):
    """Under a GFN1-xTB prior the methane dimer's run steps along the prior's negative
    curvature. With one step allowed, a run resumed after it takes no other: the
    restart file keeps the reasons."""
    from ase.io import read

    from asebo.optimize.settings import SpecialCases

    restart = tmp_path / "dimer.json"
    settings = SpecialCases(curvature_steps=1)
    atoms = read(DATA_DIR / "s22" / "Methane_dimer.xyz")
    atoms.calc = get_calculator("gfn2")
    first = BOOptimizer(
        atoms, logfile=None, restart=restart, prior=get_calculator("gfn1"), special_cases=settings
    )
    first.run(fmax=0.05, steps=3)
    assert first.reasons.count("curvature") == 1
    resumed = BOOptimizer(
        atoms, logfile=None, restart=restart, prior=get_calculator("gfn1"), special_cases=settings
    )
    assert resumed.run(fmax=0.05)
    assert resumed.reasons.count("curvature") == 1


def test_the_verdict_calls_a_negative_curvature_a_saddle_only_with_evidence():
    from asebo.optimize.model_hessian import ModelCurvature

    shared = {
        "hessian": np.zeros((3, 3)),
        "curvatures": np.array([-1.0, -0.5, 2.0]),
        "modes": np.eye(3),
        "uncertainties": np.array([0.1, 0.1, 0.1]),
    }
    assert "a saddle point by the model" in ModelCurvature(**shared).summary()  # not examined
    second = ModelCurvature(**shared, evidence=np.array([False, True, False]))
    assert list(second.evidenced) == [1] and "a saddle point by the model" in second.summary()
    neither = ModelCurvature(**shared, evidence=np.zeros(3, dtype=bool))
    assert not len(neither.evidenced)
    assert "not a saddle point the calls show" in neither.summary()
    assert "a saddle point by the model" not in neither.summary()


def test_the_result_takes_the_priors_curvature_where_only_the_interpolation_curves_down():
    from asebo.model.priors import Prior
    from asebo.optimize.model_hessian import ModelCurvature, prior_where_interpolated

    class QuadraticPrior(Prior):
        constant = False

        def __init__(self, matrix):
            self.matrix = matrix  # (3n, 3n)

        def energies_and_gradients(self, positions):
            flat = np.asarray(positions).reshape(len(positions), -1)  # (m, 3n)
            gradients = flat @ self.matrix
            return 0.5 * np.sum(flat * gradients, axis=1), gradients.reshape(positions.shape)

    modes = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0].T  # rows
    curvatures = np.array([-1.0, -0.5, 2.0])
    shared = {
        "hessian": modes.T @ np.diag(curvatures) @ modes,
        "curvatures": curvatures,
        "modes": modes,
        "uncertainties": np.array([2.0, 0.1, 0.1]),  # the first within the model's doubt
    }
    # the prior curves up along the first mode, down along the second
    prior = QuadraticPrior(modes.T @ np.diag([3.0, -0.2, 5.0]) @ modes)
    positions = np.array([[0.3, -0.1, 0.2]])
    unsupported = ModelCurvature(**shared, evidence=np.zeros(3, dtype=bool))
    replaced = prior_where_interpolated(unsupported, prior, positions)
    result = replaced.hessian
    np.testing.assert_allclose(modes @ result @ modes.T, np.diag([3.0, -0.5, 2.0]), atol=1e-6)
    # sorted again, each mode with its own uncertainty
    np.testing.assert_allclose(replaced.curvatures, [-0.5, 2.0, 3.0], atol=1e-6)
    np.testing.assert_array_equal(replaced.modes, modes[[1, 2, 0]])
    np.testing.assert_array_equal(replaced.uncertainties, [0.1, 0.1, 2.0])
    # the quadratic's drop along the first mode: none by the model, g^2 / 2k by the prior
    gradient = 0.3 * modes[0]
    assert unsupported.quadratic_drop(gradient) == pytest.approx(0.0, abs=1e-12)
    assert replaced.quadratic_drop(gradient) == pytest.approx(0.3**2 / (2 * 3.0), rel=1e-6)
    supported = ModelCurvature(**shared, evidence=np.array([True, False, False]))
    result = prior_where_interpolated(supported, prior, positions).hessian
    np.testing.assert_allclose(modes @ result @ modes.T, np.diag(curvatures), atol=1e-6)
    not_examined = ModelCurvature(**shared)
    unchanged = prior_where_interpolated(not_examined, prior, positions)
    assert np.array_equal(unchanged.hessian, shared["hessian"])


def test_a_negative_curvature_of_the_interpolation_alone_is_not_called_a_saddle():
    """S22's methane dimer meets fmax after one step; between its two observations the
    GP's mean curves down, no configuration says so, and the target curves up."""
    from ase.io import read

    atoms = read(DATA_DIR / "s22" / "Methane_dimer.xyz")
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log)
    assert optimizer.run(fmax=0.05)
    line = next(line for line in log.getvalue().splitlines() if "at convergence" in line)
    assert "not a saddle point the calls show" in line
    curvature = optimizer.model_curvature()
    assert len(curvature.negative) and not len(curvature.evidenced)
    assert "not a saddle point the calls show" in curvature.summary()
    mode = curvature.modes[curvature.negative[0]].reshape(-1, 3)
    here, step, forces = atoms.get_positions(), 0.005, []
    for sign in (1.0, -1.0):
        atoms.positions = here + sign * step * mode
        forces.append(atoms.get_forces())
    target = -np.sum((forces[0] - forces[1]) * mode) / (2 * step)
    assert curvature.curvatures[curvature.negative[0]] < -0.1 and target > 0.0


def test_evidence_of_descent_comes_from_a_prior_calculator_or_a_lower_configuration():
    from asebo.model.priors import CalculatorPrior
    from asebo.optimize.model_hessian import evidence_of_descent

    planar, frames = planar_ammonia_and_two_pyramids()
    umbrella = np.zeros((4, 3))
    umbrella[0, 2] = 1.0  # the nitrogen out of plane: down on both sides
    sideways = np.zeros((4, 3))
    sideways[1, 0] = 1.0  # a hydrogen moved in the plane: up
    computed = (
        np.array([planar.positions]),
        np.array([planar.get_potential_energy()]),
        np.array([planar.get_forces()]),
    )
    prior = CalculatorPrior(get_calculator("gfn2"), planar)
    assert evidence_of_descent(prior, computed, planar.positions, umbrella.ravel())
    assert not evidence_of_descent(prior, computed, planar.positions, sideways.ravel())
    assert not evidence_of_descent(None, computed, planar.positions, umbrella.ravel())
    lower = (
        np.array([planar.positions, frames[0].positions]),
        np.array([planar.get_potential_energy(), frames[0].get_potential_energy()]),
        np.array([planar.get_forces(), frames[0].get_forces()]),
    )
    assert evidence_of_descent(None, lower, planar.positions, umbrella.ravel())
    assert not evidence_of_descent(None, lower, planar.positions, sideways.ravel())


def test_evidence_of_descent_comes_from_a_negative_secant_along_the_mode():
    from ase.optimize import BFGS

    from asebo.optimize.model_hessian import evidence_of_descent

    planar, frames = planar_ammonia_and_two_pyramids()
    pyramid = frames[0]  # the nitrogen 0.1 Å out of plane, lower than the plane
    umbrella = np.zeros((4, 3))
    umbrella[0, 2] = 1.0
    # seen from the pyramid, the planar configuration lies along the umbrella, higher,
    # and the gradients between them curve down: (g(x) - g(c)) . (x - c) < 0
    higher = (
        np.array([planar.positions, pyramid.positions]),
        np.array([planar.get_potential_energy(), pyramid.get_potential_energy()]),
        np.array([planar.get_forces(), pyramid.get_forces()]),
    )
    step = (pyramid.positions - planar.positions).ravel()
    secant = (planar.get_forces() - pyramid.get_forces()).ravel() @ step
    assert secant < 0.0
    assert evidence_of_descent(None, higher, pyramid.positions, umbrella.ravel())
    # water's bend at its minimum: a configuration along it is higher, the secant positive
    water = molecule("H2O")
    water.calc = get_calculator("gfn2")
    BFGS(water, logfile=None).run(fmax=1e-3)
    bent = water.copy()
    bent.calc = get_calculator("gfn2")
    bend = np.zeros((3, 3))
    bend[1:, 1] = [0.1, -0.1]  # the hydrogens apart, in the molecular plane
    bent.positions = water.positions + bend
    up = (
        np.array([bent.positions, water.positions]),
        np.array([bent.get_potential_energy(), water.get_potential_energy()]),
        np.array([bent.get_forces(), water.get_forces()]),
    )
    direction = (bend / np.linalg.norm(bend)).ravel()
    assert not evidence_of_descent(None, up, water.positions, direction)


def test_quadratic_drop_is_the_drop_to_the_minimum_of_a_quadratic():
    rng = np.random.default_rng(2)
    basis, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    curvatures = np.array([-0.5, 0.1, 0.4, 1.0, 3.0, 8.0])  # one negative: skipped
    hessian = basis @ np.diag(curvatures) @ basis.T
    x = rng.normal(size=6)
    gradient = hessian @ x  # E = x^T H x / 2 about the origin
    curvature = model_hessian.ModelCurvature(hessian, curvatures, basis.T, np.zeros(6))
    up = basis[:, 1:]  # the modes of positive curvature
    # on those modes the minimum of the quadratic is their own origin
    expected = 0.5 * (up.T @ x) @ np.diag(curvatures[1:]) @ (up.T @ x)
    assert curvature.quadratic_drop(gradient) == pytest.approx(expected, rel=1e-12)
    assert curvature.quadratic_drop(gradient.reshape(2, 3)) == pytest.approx(expected)


def test_a_run_goes_on_while_the_models_quadratic_leaves_a_drop_above_the_setting():
    from asebo.optimize.settings import SpecialCases

    def relaxed(special_cases):
        atoms = molecule("CH3CH2OH")
        atoms.rattle(0.05, seed=3)
        atoms.calc = get_calculator("gfn2")
        log = io.StringIO()
        optimizer = BOOptimizer(atoms, logfile=log, special_cases=special_cases)
        assert optimizer.run(fmax=0.3)
        drop = optimizer.model_curvature().quadratic_drop(-atoms.get_forces())
        return atoms.get_potential_energy(), drop, log.getvalue()

    loose, loose_drop, _ = relaxed(SpecialCases())
    assert loose_drop > 1e-3  # stopped by the loose forces well above the model's minimum
    tight, tight_drop, log = relaxed(SpecialCases(quadratic_drop=1e-3))
    assert "quadratic puts its minimum" in log
    assert tight_drop <= 1e-3 and tight < loose - 1e-3
