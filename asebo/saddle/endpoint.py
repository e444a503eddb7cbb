"""Where :class:`asebo.saddle.BOSaddle` ends: the model's order at a configuration whose
forces are converged (:func:`asebo.saddle.order.judge_order`), a step off a saddle point
of higher order, and the record of what the search found
(:class:`asebo.saddle.result.SaddleResult`)."""

import numpy as np
from ase.parallel import broadcast

from asebo.model.priors import PriorCalculationError
from asebo.optimize.walk_trust import largest_norm
from asebo.saddle.mode_probe import mode_overlap
from asebo.saddle.order import OrderVerdict, judge_order
from asebo.saddle.result import judged_end, unjudged_end
from asebo.threads import with_optimizer_threads


class SaddleEndpoint:
    """The order verdict and the result of :class:`asebo.saddle.BOSaddle`: a mixin of a
    driver with ``atoms``, ``fmax``, ``comm``, ``step_log``, ``observations`` (its
    ``start``), ``settings``, ``trust_radius``, ``rotations``,
    ``_order``, ``_order_noted``, ``_stopped``, ``_predicted``, ``_free()``,
    ``_free_forces()``, ``_fitted()`` and ``_save()``."""

    @property
    def result(self):
        """The :class:`asebo.saddle.result.SaddleResult` where the atoms stand; None
        before a run."""
        if self.fmax is None:
            return None
        verdict = self._order_verdict()
        if verdict is not None and verdict.step is None:
            return judged_end(verdict, self._overlap_with_start(verdict))
        order = None if verdict is None else verdict.order
        return unjudged_end(verdict is not None, order, self._stopped)

    def _overlap_with_start(self, verdict):
        """The overlap of ``verdict``'s imaginary mode with the mode climbed from the
        start (:func:`asebo.saddle.mode_probe.mode_overlap`; under a prior calculator
        that mode is found here, :meth:`_start_mode_afterwards`); None without either."""
        if verdict.mode is None:
            return None
        start_mode = self._start_mode_afterwards()
        if start_mode is None:
            return None
        start = np.asarray(self.observations.state["start"], dtype=float)
        return mode_overlap(start, start_mode, self.atoms.positions, verdict.mode, self.rotations)

    def _order_step(self):
        """The :class:`asebo.saddle.order.OrderStep` of :meth:`_order_verdict`, or None."""
        verdict = self._order_verdict()
        return None if verdict is None else verdict.step

    @with_optimizer_threads
    def _order_verdict(self):
        """The :class:`asebo.saddle.order.OrderVerdict` at the atoms' positions where
        they were computed and their forces are below ``fmax`` (its step at most
        ``order_steps`` of the settings times a search); else None, on every rank
        alike. Rank 0 decides, once per configuration and record."""
        positions = self.atoms.positions.copy()  # (n, 3)
        index = self.observations.find(positions)
        if index is None or largest_norm(self._free_forces(index)) >= self.fmax:
            return None  # judged before the cache: a run may ask a smaller fmax
        key = (len(self.observations.energies), positions.tobytes())
        if self._order is not None and self._order[0] == key:
            return self._order[1]
        verdict = None
        if self.comm.rank == 0:
            taken = int(self.observations.state.get("order_steps", 0))
            steps_left = self.settings.order_steps - taken
            try:
                verdict = judge_order(
                    self._fitted(),
                    self.observations,
                    positions,
                    self._free(),
                    self.atoms.get_masses(),
                    self.trust_radius,
                    steps_left,
                    self.rotations,
                )
            except PriorCalculationError as error:  # its curvature by differences, say
                verdict = OrderVerdict(np.zeros(0), 0, None, unknown=str(error))
        verdict = broadcast(verdict, root=0, comm=self.comm)
        self._order = (key, verdict)
        return verdict

    def _note_order(self):
        """The model's order where the search ends, in the log once."""
        verdict = self._order_verdict()
        if verdict is None or self._order_noted == self._order[0]:
            return
        overlap = self._overlap_with_start(verdict)
        turned = (
            []
            if overlap is None
            else [f"its imaginary mode overlaps the mode climbed from the start by {overlap:.2f}"]
        )
        self.step_log.notes([verdict.note(), *turned])
        self._order_noted = self._order[0]

    def _step_off(self, stepped):
        """Move the atoms to the :class:`asebo.saddle.order.OrderStep` ``stepped``, with
        the model's forces there as the prediction the trust radius is judged by."""
        self.step_log.notes([stepped.note()])
        self.reason = "step off"
        following = stepped.positions  # (n, 3)
        _, gradient = self._fitted().predict(following[None], return_gradient=True)
        self._predicted = (following, -np.asarray(gradient)[0], False)
        taken = int(self.observations.state.get("order_steps", 0))
        self.observations.state["order_steps"] = taken + 1
        self._save(following)
        self.atoms.positions = following
