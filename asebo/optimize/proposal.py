"""What one step of :class:`asebo.BOOptimizer` starts from and what it proposes.

:class:`StepContext` holds everything a step decides from (the fitted model, the
observations, the settings, the special cases found in them); :class:`Proposal` is
the configuration to compute next, with the model's energy there, the trust region
for the next step and the ``reason``: which part of the step chose it
(:mod:`asebo.optimize.search`, :mod:`asebo.optimize.stages`). Neither writes
anything: the notes for the log travel with the proposal, and the optimizer writes
them.
"""

from dataclasses import dataclass

import numpy as np

from asebo.model.priors import PriorCalculationError

SEARCH = "search"  # the model's proposal, from the search of its lower confidence bound
SEARCH_FAILED = "search_failed"  # every search failed: a stage must replace it
FORCE_STEP = "force_step"  # a step along the forces: the model had nothing new to offer
RIGID_MOVE = "rigid_move"  # the model's proposal moved rigidly along the net force and torque
CURVATURE = "curvature"  # forces converged where the model's energy curves down: a step along it
PROBE = "probe"  # forces converged on a symmetry the whole run kept: a step that breaks it
REASONS = (SEARCH, SEARCH_FAILED, FORCE_STEP, RIGID_MOVE, CURVATURE, PROBE)
"""Every ``reason`` a :class:`Proposal` may give, as recorded in the log and restart file."""


@dataclass(frozen=True)
class Proposal:
    """The configuration to compute next, and why.

    Attributes
    ----------
    positions : ndarray (n, 3) or None
        None only after every search failed (``reason`` ``'search_failed'``).
    predicted_energy : float or None
        The model's energy there (eV): the lowest energy computed less the model's drop
        from there. None where the model did not choose the step (a symmetry probe) or
        the prior calculator cannot tell; the trust region then stays as it is.
    trust : asebo.optimize.trust.TrustRegion
        The trust region of this step, as the searches left it.
    reason : str
        One of :data:`REASONS`.
    retried : tuple of str
        Why each search before this one failed, in order: repeated in a box half the
        size, ``'prior_failed'`` (the prior calculator failed), ``'uncertain'`` (the
        model doubts its drop); repeated once in a box where the drop is surest and taken,
        ``'slope_noise'`` (the doubt is the noise on the model's slope); repeated in
        the same box with the prior's curvature along
        the step, ``'overturned'`` (the model curves down along the step where its
        prior curves up, and no configuration computed falls that way).
    notes : tuple of str
        Lines for the log, in the order they arose.
    """

    positions: np.ndarray | None
    predicted_energy: float | None
    trust: object
    reason: str
    retried: tuple = ()
    notes: tuple = ()

    def record(self):
        """What the restart file keeps of it: ``{'reason': ..., 'retried': [...]}``."""
        return {"reason": self.reason, "retried": list(self.retried)}


@dataclass(frozen=True)
class StepContext:
    """What one step decides from.

    Attributes
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to every observation.
    observations : asebo.optimize.observations.Observations
    best : int
        Index of the lowest energy observed: the centre of the trust box.
    free : bool array (n, 3)
        Coordinates no constraint holds.
    trust : asebo.optimize.trust.TrustRegion
        The region after the last proposal was judged.
    settings : asebo.optimize.settings.Settings
        Resolved: ``settings.trust_region.maxstep`` is a number.
    prior : asebo.model.priors.Prior
    rigid_left : bool
        Only the net force and torque keep the lowest configuration from converging.
    notes : tuple of str
        Lines for the log from fitting the model.
    subspace : asebo.optimize.subspace.FreeSubspace or None
        The displacements the search makes within ``free``, where they are fewer
        (:func:`asebo.optimize.subspace.search_subspace`).
    """

    gp: object
    observations: object
    best: int
    free: np.ndarray
    trust: object
    settings: object
    prior: object
    rigid_left: bool
    notes: tuple = ()
    subspace: object = None

    @property
    def centre(self):
        """Positions (n, 3) of the lowest energy observed."""
        return self.observations.positions[self.best]

    @property
    def maxstep(self):
        """Å: the largest displacement of an atom in one step."""
        return self.settings.trust_region.maxstep

    def is_new(self, positions):
        """Whether ``positions`` (n, 3) differ from every configuration computed."""
        return self.observations.find(positions, self.settings.search.new) is None

    def predicted(self, positions):
        """The model's energy at ``positions`` (n, 3): the lowest energy computed less
        the model's drop from there; None where the prior calculator fails."""
        try:
            mean = self.gp.predict(np.array([positions, self.centre]))  # (2,)
        except PriorCalculationError:
            return None
        return float(self.observations.energies[self.best] + mean[0] - mean[1])
