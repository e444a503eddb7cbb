"""The checks at convergence as stages whose verdicts are records."""

import io

import numpy as np
import pytest
from ase.io import read
from test_model_hessian import planar_ammonia_and_two_pyramids

from asebo import BOOptimizer
from asebo.benchmarks import baker
from asebo.model.priors import resolve_prior
from asebo.optimize.endpoint import ACCEPTED, probed_along
from asebo.optimize.proposal import CURVATURE
from asebo.optimize.settings import SpecialCases
from calculators import get_calculator


def flat_methylamine():
    """The Baker start of methylamine: its nitrogen flat with C and the two H."""
    return read(baker.DEFAULT_DIR / "07_methylamine.xyz")


def angle_sum(atoms, centre, neighbours):
    """Sum (degrees) of the three bond angles at ``centre``: 360 when it is flat."""
    first, second, third = neighbours
    return (
        atoms.get_angle(first, centre, second)
        + atoms.get_angle(second, centre, third)
        + atoms.get_angle(first, centre, third)
    )


def nitrogen_neighbours(atoms):
    nitrogen = atoms.get_chemical_symbols().index("N")
    distances = atoms.get_distances(nitrogen, range(len(atoms)))
    return nitrogen, np.argsort(distances)[1:4]


def test_a_probe_moves_the_farthest_atom_by_its_length_along_the_mode():
    positions = np.zeros((3, 3))
    mode = np.array([0.0, 0.0, 3.0, 0.0, 4.0, 0.0, 1.0, 0.0, 0.0])
    mode /= np.linalg.norm(mode)
    moved = probed_along(positions, mode, 0.1)
    assert np.linalg.norm(moved - positions, axis=1).max() == pytest.approx(0.1)
    step = (moved - positions).ravel()
    assert step @ mode == pytest.approx(np.linalg.norm(step))


def test_converged_forces_on_a_saddle_give_a_curvature_verdict_that_the_next_step_takes():
    planar, frames = planar_ammonia_and_two_pyramids()
    log = io.StringIO()
    optimizer = BOOptimizer(planar, logfile=log, observations=frames)
    start = planar.get_positions()
    assert not optimizer.run(fmax=0.05, steps=0)  # the forces meet ASE's test
    assert optimizer.optimizable.converged(optimizer.optimizable.get_gradient(), 0.05)
    verdict = optimizer.endpoint_verdict
    assert verdict.stage == CURVATURE and not verdict.converged
    assert verdict.value < 0.0
    assert np.linalg.norm(verdict.positions - start, axis=1).max() <= 0.1 + 1e-12
    written = log.getvalue()
    # the convergence test is a predicate: asked again, the same answer, nothing written
    gradient = optimizer.optimizable.get_gradient()
    assert not optimizer.gradient_converged(gradient)
    assert optimizer.endpoint_verdict is verdict and log.getvalue() == written
    optimizer.step()
    np.testing.assert_allclose(planar.positions, verdict.positions)
    assert optimizer.reasons == [CURVATURE]
    assert f"# {verdict.notes[0]}" in log.getvalue()


def test_an_accepted_endpoint_is_the_record_the_log_line_gives():
    planar, frames = planar_ammonia_and_two_pyramids()
    log = io.StringIO()
    optimizer = BOOptimizer(
        planar,
        logfile=log,
        observations=frames,
        special_cases=SpecialCases(curvature_steps=0),
    )
    assert optimizer.run(fmax=0.05)
    verdict = optimizer.endpoint_verdict
    assert verdict.stage == ACCEPTED and verdict.converged and verdict.positions is None
    assert "a saddle point by the model" in verdict.summary
    notes = [line[2:] for line in log.getvalue().splitlines() if line.startswith("# ")]
    assert notes[-1] == f"at convergence, {verdict.summary}" == verdict.notes[-1]
    assert optimizer.curvature_verdict == verdict.summary


def test_no_verdict_where_the_forces_do_not_meet_the_test():
    planar, frames = planar_ammonia_and_two_pyramids()
    planar.positions[0, 2] += 0.05
    optimizer = BOOptimizer(planar, logfile=None, observations=frames)
    assert optimizer.endpoint_verdict is None  # before run(): no fmax
    optimizer.run(fmax=1e-4, steps=0)
    assert optimizer.endpoint_verdict is None


def test_under_a_prior_calculator_a_flat_amine_leaves_its_plane_by_the_curvature_step():
    """The prior calculator's own curvature at the flat saddle leads the step at
    convergence (reason ``'curvature'``) down to the pyramid."""
    atoms = flat_methylamine()
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    assert angle_sum(atoms, nitrogen, neighbours) == pytest.approx(360.0, abs=1e-3)
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None, prior=resolve_prior("gfn1"))
    assert optimizer.run(fmax=0.05, steps=50)
    assert CURVATURE in optimizer.reasons
    assert angle_sum(atoms, nitrogen, neighbours) < 345.0
