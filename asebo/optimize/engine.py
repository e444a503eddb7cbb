"""The step machine of :class:`asebo.BOOptimizer`: observations in, a proposal with its
reason out, and the verdict of the checks at convergence; nothing of ASE in it.

One step: fit the GP to every observation (once per observation,
:class:`asebo.optimize.surrogate_model.Surrogate`), then either take the step of
a check at convergence that keeps the run going (:mod:`asebo.optimize.endpoint`), or
search the lower confidence bound in the trust box
(:func:`asebo.optimize.search.search`) and offer the proposal to the stages of
:data:`asebo.optimize.stages.STAGES`. The driver (:class:`asebo.BOOptimizer`) keeps the
run's state (the observations, the trust region, the reasons of the proposals), reads
and writes the restart file and the log, and moves the atoms.
"""

from dataclasses import replace

import numpy as np

from asebo.optimize.endpoint import EndpointContext, endpoint_verdict
from asebo.optimize.lowest_curvatures import lowest_model_curvature
from asebo.optimize.model_hessian import ModelHessian, curvature_with_evidence, internal_basis
from asebo.optimize.proposal import CURVATURE, Proposal, StepContext
from asebo.optimize.search import search
from asebo.optimize.stages import STAGES, only_rigid_forces_left, search_starts


class Engine:
    """The model, the search, the stages and the checks at convergence of one run.

    Parameters
    ----------
    surrogate : asebo.optimize.surrogate_model.Surrogate
        The GP, its prior and representation, fitted once per observation.
    numbers : array (N,) of int
        Atomic numbers of the rows of the positions (a cell's rows are 0).
    settings : asebo.optimize.settings.Settings
    free : array (N, 3) of bool
        The coordinates no constraint holds.
    subspace : asebo.optimize.subspace.FreeSubspace or None
        The moves of the search where they are a subspace: what the constraints allow,
        a cell filter's deformation kept symmetric
        (:func:`asebo.optimize.subspace.search_subspace`).
    periodic : bool
        A periodic cell, or a cell filter.
    cell : bool
        The positions include a cell filter's rows: no check at convergence applies.
    """

    def __init__(self, surrogate, numbers, settings, free, subspace, periodic, cell):
        self.surrogate = surrogate
        self.gp, self.prior = surrogate.gp, surrogate.prior
        self.representation = surrogate.representation
        self.numbers, self.settings = numbers, settings
        self.free, self.subspace, self.periodic, self.cell = free, subspace, periodic, cell
        self.rotations = not periodic and bool(free.all())  # rigid rotations of a molecule
        self._verdict = None  # ((observations counted, positions), Verdict) of the last check

    def fitted(self, observations):
        """The GP fitted to every observation, and notes for the log
        (:meth:`asebo.optimize.surrogate_model.Surrogate.fitted`): the check at
        convergence and the step after it read the same fit (and its Hessians,
        :attr:`asebo.model.gp.EnergyForceGP.hessians_`)."""
        return self.surrogate.fitted(observations)

    def curvature_at(
        self, observations, positions, every_uncertainty=True, anchored=False, measure=None
    ):
        """:func:`asebo.optimize.model_hessian.curvature_with_evidence` of the GP fitted
        to every observation, at ``positions`` (N, 3)."""
        gp, _ = self.fitted(observations)
        return curvature_with_evidence(
            gp,
            observations,
            positions,
            self.free,
            self.rotations,
            self.prior.is_calculator,
            every_uncertainty,
            anchored,
            measure,
        )

    def lowest_curvatures(self, observations, here):
        """The measure of the check at convergence at ``here`` (N, 3), where the whole
        Hessian costs prior calls (a prior calculator on a molecule):
        :func:`asebo.optimize.lowest_curvatures.lowest_model_curvature`,
        ``gp -> ModelCurvature``; None where the Hessian is cheap, or ``here`` is not the
        latest configuration computed, whose forces the quadratic's drop reads."""
        latest = len(observations) - 1
        if not self.prior.is_calculator or self.periodic or latest < 0:
            return None
        if not np.array_equal(observations.positions[latest], here):
            return None
        gradient = -np.asarray(observations.forces[latest], dtype=np.float64)  # (N, 3)
        basis = internal_basis(here, self.free, self.rotations)  # (3N, k)
        return lambda gp: lowest_model_curvature(gp, here, self.numbers, gradient, basis)

    def model_hessian(self, observations, atoms, every_uncertainty=True):
        """The :class:`asebo.optimize.model_hessian.ModelHessian` at ``atoms``' positions,
        a configuration computed, of the anchored GP
        (:func:`asebo.optimize.model_hessian.curvature_with_evidence`); where the
        constraints allow a subspace (a plane or line along no axis, FixSymmetry), its Hessian
        projected onto it, as held coordinates have zero rows."""
        positions = atoms.positions
        _, curvature = self.curvature_at(observations, positions, every_uncertainty, True)
        prior = self.gp.prior.for_hessian()
        result = ModelHessian.of(curvature, prior, atoms, self.free, self.rotations)
        if self.subspace is None:
            return result
        projector = self.subspace.basis @ self.subspace.basis.T  # (3N, 3N)
        return replace(result, hessian=projector @ result.hessian @ projector)

    def vibrates(self, positions):
        """Whether ``positions`` (N, 3) have a free coordinate beyond the rigid motions
        (not one atom alone, nor atoms all held)."""
        return internal_basis(positions, self.free, self.rotations).shape[1] > 0

    def endpoint_verdict(self, observations, positions, reasons, radius):
        """The :class:`asebo.optimize.endpoint.Verdict` of the checks at convergence at
        ``positions``, whose forces met the driver's test; None where no check applies
        (a cell filter, constraints that allow a subspace only, no free coordinate
        beyond the rigid motions). Decided once per observation and configuration.

        Parameters
        ----------
        observations : asebo.optimize.observations.Observations
        positions : array (N, 3)
            A configuration computed, the latest as a rule.
        reasons : sequence of str
            The reason of every proposal of the run, in order.
        radius : float
            Å: how far a curvature step may go.
        """
        here = np.array(positions, dtype=float)  # (N, 3)
        key = (len(observations), here.tobytes())
        if self._verdict is None or self._verdict[0] != key:
            self._verdict = (key, self._judged(observations, here, tuple(reasons), radius))
        return self._verdict[1]

    def _judged(self, observations, here, reasons, radius):
        """:meth:`endpoint_verdict`, decided."""
        if self.cell or self.subspace is not None or not self.vibrates(here):
            return None
        measure = self.lowest_curvatures(observations, here)
        gp, curvature = self.curvature_at(observations, here, False, measure=measure)
        context = EndpointContext(
            gp=gp,
            curvature=curvature,
            positions=here,
            observations=observations,
            reasons=reasons,
            settings=self.settings,
            periodic=self.periodic,
            labels=8 * self.numbers + self.free @ np.array([1, 2, 4]),  # held apart
            basis=internal_basis(here, self.free, self.rotations),
            radius=radius,
        )
        return endpoint_verdict(context)

    def propose(self, observations, trust, fmax, verdict=None):
        """The next configuration to compute.

        Parameters
        ----------
        observations : asebo.optimize.observations.Observations
        trust : asebo.optimize.trust.TrustRegion
            The trust region after the last proposal was judged.
        fmax : float or None
            eV/Å: the run's force criterion, where known.
        verdict : asebo.optimize.endpoint.Verdict, optional
            Of the checks at convergence on the latest observation: a step it takes
            is the proposal; its notes go with the model's proposal otherwise.

        Returns
        -------
        asebo.optimize.proposal.Proposal
            With its reason and the notes for the log.

        Raises
        ------
        asebo.optimize.stages.NoProgressError
            A stage finds no configuration left to compute.
        """
        context = self.step_context(observations, trust, fmax)
        if verdict is not None and verdict.positions is not None:
            positions, reason = verdict.positions, verdict.stage
            predicted = context.predicted(positions) if reason == CURVATURE else None
            return Proposal(positions, predicted, context.trust, reason, notes=verdict.notes)
        kept_going = () if verdict is None else verdict.notes  # the quadratic drop's
        proposal = search(context, search_starts(context))
        proposal = replace(proposal, notes=(*kept_going, *context.notes, *proposal.notes))
        for stage in STAGES:
            adjusted = stage(context, proposal)
            if adjusted is not None:
                return adjusted
        return replace(proposal, predicted_energy=context.predicted(proposal.positions))

    def step_context(self, observations, trust, fmax):
        """The model fitted to every observation, and what the step decides from
        (:class:`asebo.optimize.proposal.StepContext`); the search's tolerances those
        of the force criterion ``fmax``
        (:meth:`asebo.optimize.settings.SearchSettings.for_force_criterion`)."""
        gp, notes = self.fitted(observations)
        best = observations.best()
        rigid_left = self.subspace is None and only_rigid_forces_left(
            observations.positions[best],
            observations.forces[best],
            fmax,
            self.free,
            self.representation.invariant(gp.metric),
        )
        search = self.settings.search.for_force_criterion(fmax)
        return StepContext(
            gp,
            observations,
            best,
            self.free,
            trust,
            replace(self.settings, search=search),
            self.prior,
            rigid_left,
            notes,
            self.subspace,
        )
