"""The walk of :class:`asebo.saddle.BOSaddle` on its model: Sella's walk within the trust
radius (:func:`asebo.saddle.model_search.saddle_on_model`), its end moved as a whole
where only a calculator's net force and torque keep the last call from converging, and
the trust radius judged by the model's force error at each call on the atoms it moves
(:func:`asebo.optimize.walk_trust.adapted_radius`), and the run ended where the walk
ends on a configuration already computed."""

import numpy as np

from asebo.optimize.model_calculators import ModelCalculator
from asebo.optimize.rigid import moved_rigidly, rigid_move_length, rigid_step
from asebo.optimize.stages import only_rigid_forces_left
from asebo.optimize.walk_trust import adapted_radius
from asebo.saddle.model_search import saddle_on_model
from asebo.saddle.result import WALK_FAILED, WALK_ON_COMPUTED


class ModelWalk:
    """The walk of :class:`asebo.saddle.BOSaddle`: a mixin of a driver with ``atoms``,
    ``fmax``, ``observations``, ``settings``, ``trust_radius``, ``rotations`` (a
    molecule's: walked in internal coordinates), ``representation``, ``gp``,
    ``_predicted``, ``_free()`` and ``_fitted()``."""

    def _walk(self):
        """The walk on the model from the atoms' positions: (where it ends (n, 3), the
        model's forces there (n, 3), whether the trust radius stopped it) and why it
        ended."""
        gp = self._fitted()
        model_fmax = self.settings.model_fmax
        fmax = self.fmax / 5 if model_fmax is None else model_fmax
        known = np.array(self.observations.positions)  # (m, n, 3)
        following, reason = saddle_on_model(
            ModelCalculator(gp),
            self.atoms,
            known,
            self.trust_radius,
            fmax,
            self.settings.model_steps,
            self.settings.walk.bisections,
            internal=self.rotations,
        )
        following = self._moved_rigidly(following)
        _, gradient = gp.predict(following[None], return_gradient=True)
        return (following, -np.asarray(gradient)[0], reason == "trust radius"), reason

    def _rigid_calls(self):
        """The configurations computed last, in a row, that only their net force and
        torque keep from converging (:func:`only_rigid_forces_left`)."""
        free = self._free()
        invariant = self.representation.invariant(self.gp.metric)
        count = 0
        for positions, forces in zip(
            self.observations.positions[::-1], self.observations.forces[::-1]
        ):
            if not only_rigid_forces_left(positions, forces, self.fmax, free, invariant):
                break
            count += 1
        return count

    def _moved_rigidly(self, following):
        """``following`` (n, 3) moved as a whole along the net force and torque of the
        configuration last computed, where only they keep it from converging."""
        index = self.observations.find(self.atoms.positions)
        rigid = 0 if index != len(self.observations.energies) - 1 else self._rigid_calls()
        if rigid == 0:
            return following
        length = rigid_move_length(self.observations.energies[-rigid:])
        translation, rotation = rigid_step(
            self.atoms.positions, self.observations.forces[index], length
        )
        return moved_rigidly(following, translation, rotation)

    def _adapt_trust_radius(self, positions, forces):
        """Grow or shrink the trust radius by the model's force error at ``positions``,
        on the coordinates the walk moves (no ``FixAtoms`` holds)."""
        if self._predicted is None or not np.allclose(self._predicted[0], positions):
            return
        _, predicted, stopped = self._predicted
        free = self._free()  # (n, 3)
        self.trust_radius = adapted_radius(
            self.trust_radius,
            np.where(free, forces, 0.0),
            np.where(free, predicted, 0.0),
            self.fmax or 0.0,
            stopped,
            self.settings.max_trust_radius,
            self.settings.walk,
        )

    def _end_without_call(self, reason):
        """End the run after this step: the walk, which ended for ``reason``
        (:func:`asebo.saddle.model_search.saddle_on_model`), ended on a configuration
        computed."""
        self.max_steps = self.nsteps + 1
        self._stopped = WALK_FAILED if reason == "walk failed" else WALK_ON_COMPUTED
        self.step_log.notes(
            [
                f"the walk on the model ends on a configuration already computed ({reason}), "
                "whose forces are above fmax: the search stops there, not converged"
            ]
        )
