"""The step machine without ASE: observations in, a proposal and its reason out, on
closed-form surfaces."""

import numpy as np
import pytest

from asebo.model.gp import EnergyForceGP
from asebo.model.priors import HighestEnergyPrior
from asebo.optimize.endpoint import ACCEPTED
from asebo.optimize.engine import Engine
from asebo.optimize.observations import Observations
from asebo.optimize.proposal import REASONS, SEARCH
from asebo.optimize.representations import CartesianPositions
from asebo.optimize.resolve import resolve_settings
from asebo.optimize.settings import TrustSettings
from asebo.optimize.surrogate_model import Surrogate
from asebo.optimize.trust import TrustRegion

MINIMUM = np.array([[0.0, 0.0, 0.0], [1.0, 0.2, -0.1], [0.3, 1.1, 0.4]])  # (3, 3)
STIFFNESS = np.array([2.0, 1.0, 0.5, 3.0, 1.5, 0.8, 1.2, 2.5, 0.7]).reshape(3, 3)


def bowl(positions):
    """A quadratic bowl, its energy (eV) and forces (3, 3), minimum at MINIMUM."""
    displacement = positions - MINIMUM
    return 0.5 * float((STIFFNESS * displacement**2).sum()), -STIFFNESS * displacement


def cartesian_engine(observations_numbers):
    representation = CartesianPositions()
    settings = resolve_settings(representation, False, 9)
    gp = EnergyForceGP(
        trend=settings.model.trend,
        prior_curvature=settings.model.prior_curvature,
        kernel=representation.gp_kernel(),
    )
    free = np.ones((3, 3), dtype=bool)
    return Engine(
        Surrogate(gp, HighestEnergyPrior(), representation, observations_numbers),
        observations_numbers,
        settings,
        free,
        subspace=None,
        periodic=False,
        cell=False,
    )


def relax(positions, steps, fmax=0.01):
    """Run the engine on :func:`bowl` from ``positions``; the observations and proposals."""
    numbers = np.array([18, 18, 18])
    engine = cartesian_engine(numbers)
    observations = Observations(numbers)
    trust = TrustRegion(0.1, 0.2, TrustSettings())
    proposals = []
    for _ in range(steps):
        energy, forces = bowl(positions)
        observations.append(positions, energy, forces)
        if proposals and proposals[-1].predicted_energy is not None:
            energies = observations.energies
            trust = trust.after(min(energies[:-1]), proposals[-1].predicted_energy, energy)
        if np.linalg.norm(forces, axis=1).max() < fmax:
            return engine, observations, proposals
        proposal = engine.propose(observations, trust, fmax)
        proposals.append(proposal)
        trust = proposal.trust
        positions = proposal.positions
    return engine, observations, proposals


def test_the_engine_alone_relaxes_a_quadratic_bowl_with_reasons():
    start = MINIMUM + np.array([[0.15, -0.1, 0.05], [-0.1, 0.12, 0.0], [0.05, 0.1, -0.15]])
    engine, observations, proposals = relax(start, steps=40)
    best = observations.best()
    assert np.linalg.norm(observations.forces[best], axis=1).max() < 0.01
    np.testing.assert_allclose(observations.positions[best], MINIMUM, atol=0.01)
    assert len(observations) < 30  # a quadratic model of a quadratic: few calls
    assert all(proposal.reason in REASONS for proposal in proposals)
    assert proposals[0].reason == SEARCH
    # each proposal stays within the trust box it was searched in (and maxstep)
    for k, proposal in enumerate(proposals):
        step = (
            proposal.positions
            - observations.positions[: k + 1][int(np.argmin(observations.energies[: k + 1]))]
        )
        assert np.abs(step).max() <= 0.2 + 1e-9


def test_the_prediction_of_a_search_step_is_the_models_drop_from_the_lowest():
    _, observations, _ = relax(MINIMUM + 0.1, steps=3)
    engine = cartesian_engine(observations.numbers)
    proposal = engine.propose(observations, TrustRegion(0.1, 0.2, TrustSettings()), 0.01)
    gp, _ = engine.fitted(observations)
    best = observations.best()
    model = gp.predict(np.stack([observations.positions[best], proposal.positions]))  # (2,)
    expected = observations.energies[best] - (model[0] - model[1])
    assert proposal.reason == SEARCH
    assert proposal.predicted_energy == pytest.approx(expected, abs=1e-10)
    assert proposal.predicted_energy < observations.energies[best]  # a drop
    assert proposal.predicted_energy > bowl(MINIMUM)[0] - 0.01  # not below the bowl's floor


def test_at_the_bowls_minimum_the_endpoint_is_accepted_with_positive_curvatures():
    numbers = np.array([18, 18, 18])
    engine = cartesian_engine(numbers)
    observations = Observations(numbers)
    for shift in (0.0, 0.05, -0.04):
        positions = MINIMUM + shift * np.eye(3)[[0, 1, 2]]
        observations.append(positions, *bowl(positions))
    observations.append(MINIMUM, *bowl(MINIMUM))
    verdict = engine.endpoint_verdict(observations, MINIMUM, (), radius=0.1)
    assert verdict.stage == ACCEPTED and verdict.converged
    assert "lowest model curvature" in verdict.summary
    # decided once per observation: asked again, the same record
    assert engine.endpoint_verdict(observations, MINIMUM, (), radius=0.1) is verdict


def test_a_surrogate_fitted_alone_to_the_first_observations_leaves_the_runs_fit_as_it_was():
    numbers = np.array([18, 18, 18])
    observations = Observations(numbers)
    rng = np.random.default_rng(3)
    for _ in range(4):
        positions = MINIMUM + rng.normal(scale=0.1, size=(3, 3))
        observations.append(positions, *bowl(positions))
    engine = cartesian_engine(numbers)
    gp, _ = engine.fitted(observations)
    query = (MINIMUM + 0.05)[None]  # (1, 3, 3)
    before = gp.predict(query, return_gradient=True)
    positions, energies, forces = observations.arrays()
    alone = engine.surrogate.fitted_alone((positions[:2], energies[:2], forces[:2]))
    first_two = Observations(numbers)
    for index in range(2):
        first_two.append(positions[index], energies[index], forces[index])
    fresh, _ = cartesian_engine(numbers).fitted(first_two)
    assert alone is not gp
    np.testing.assert_allclose(alone.predict(query), fresh.predict(query), rtol=1e-10)
    after = gp.predict(query, return_gradient=True)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert engine.fitted(observations)[0] is gp
    assert not np.allclose(alone.predict(query), gp.predict(query))
