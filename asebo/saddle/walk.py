"""The walk of :class:`asebo.saddle.BOSaddle` on its model: Sella's walk within the trust
radius (:func:`asebo.saddle.model_search.saddle_on_model`), its end moved as a whole
where only a calculator's net force and torque keep the last call from converging, and
the trust radius judged by the model's force error at each call on the atoms it moves
(:func:`asebo.optimize.walk_trust.adapted_radius`), and a Newton step on the computed
forces where the walk ends on a configuration already computed."""

import numpy as np

from asebo.model.priors import PriorCalculationError
from asebo.optimize.model_calculators import ModelCalculator
from asebo.optimize.model_hessian import internal_basis, posterior_hessian
from asebo.optimize.rigid import moved_rigidly, rigid_move_length, rigid_step
from asebo.optimize.stages import only_rigid_forces_left
from asebo.optimize.walk_trust import adapted_radius, largest_norm
from asebo.saddle.model_search import saddle_on_model
from asebo.saddle.result import WALK_FAILED, WALK_ON_COMPUTED

NEWTON_STEP = "Newton step on the computed forces"
"""The log's word for a step off a configuration computed where the walk ended on it
(:meth:`ModelWalk._newton_from_computed`)."""


class ModelWalk:
    """The walk of :class:`asebo.saddle.BOSaddle`: a mixin of a driver with ``atoms``,
    ``fmax``, ``observations``, ``settings``, ``trust_radius``, ``rotations`` (a
    molecule's: walked in internal coordinates), ``representation``, ``gp``, ``prior``,
    ``_predicted``, ``_free()``, ``_free_forces()`` and ``_fitted()``."""

    def _walk(self):
        """The walk on the model from the atoms' positions: (where it ends (n, 3), the
        model's forces there (n, 3), whether the trust radius stopped it), how it ended
        for the log, and why the run ends there (the walk's reason) where it ends on a
        configuration computed with no Newton step off it (:meth:`_newton_from_computed`),
        else None. Near convergence on a model whose forces were off at the last call,
        the Newton step off that call instead (:meth:`_newton_near_convergence`)."""
        stepped = self._newton_near_convergence()
        if stepped is not None:
            return stepped, f"{NEWTON_STEP}, the model's off by more than fmax", None
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
        walked = (following, -np.asarray(gradient)[0], reason == "trust radius")
        if self.observations.find(following) is None:
            return walked, f"walk: {reason}", None
        stepped = self._newton_from_computed(following)
        if stepped is None:
            return walked, f"walk: {reason}", reason
        return stepped, f"walk: {reason}, {NEWTON_STEP}", None

    def _newton_near_convergence(self):
        """Under a prior that is no calculator, the Newton step off the configuration
        computed last (:meth:`_newton_from_computed`) where its largest force is below
        ``newton_near`` times ``fmax`` and the model's forces there were off by more than
        ``fmax``; else None.

        A model whose forces err by more than ``fmax`` near the saddle point cannot place
        it to ``fmax``: walks on it end a trust radius away, among calls whose forces
        stay near ``fmax``. The step on the computed forces, with the model's curvature,
        is the quasi-Newton step of a saddle search on the calls. Under a prior
        calculator the model's Hessian costs its calls (central differences) and the
        walks do not wander so: the step is not taken there."""
        near = self.settings.newton_near
        if near <= 0 or self._predicted is None or self.prior.is_calculator:
            return None
        index = len(self.observations.energies) - 1
        latest = np.asarray(self.observations.positions[index])  # (n, 3)
        if not np.allclose(self._predicted[0], latest):
            return None
        forces = self._free_forces(index)  # (n, 3)
        error = largest_norm(np.where(self._free(), forces - self._predicted[1], 0.0))
        if error <= self.fmax or largest_norm(forces) >= near * self.fmax:
            return None
        return self._newton_from_computed(latest)

    def _newton_from_computed(self, following):
        """Where the walk ended on ``following`` (n, 3), a configuration computed whose
        forces are above ``fmax``: the Newton step from there on the model's quadratic
        with the computed forces (:func:`newton_step`), within the trust radius, as
        (where it ends (n, 3), moved as a whole as the walk's end is
        (:meth:`_moved_rigidly`), the model's forces there (n, 3), whether the trust
        radius or a prior calculator that fails further cut it, halved up to the walk's
        ``bisections``); None where that configuration is computed too, or where the
        prior has no value at the start or along the step.

        The model's saddle point is then a call whose forces it does not reproduce (its
        noise, relative to the spread of every energy computed, is larger than
        ``fmax`` there): a walk on it returns to that call, where the step on the
        computed forces adds the call the model lacks, as a quasi-Newton saddle search
        takes it."""
        gp = self._fitted()
        forces = self._free_forces(self.observations.find(following))
        free = self._free()
        try:
            hessian = posterior_hessian(gp, following, free)  # (3n, 3n)
        except PriorCalculationError:
            return None
        basis = internal_basis(following, free, self.rotations)  # (3n, k)
        step, cut = newton_step(hessian, basis, forces, self.trust_radius)
        for halvings in range(self.settings.walk.bisections + 1):
            reached = self._moved_rigidly(following + step / 2**halvings)
            if self.observations.find(reached) is not None:
                return None
            try:
                _, gradient = gp.predict(reached[None], return_gradient=True)
            except PriorCalculationError:  # halved towards where the prior has a value
                continue
            return reached, -np.asarray(gradient)[0], cut or halvings > 0
        return None

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
        computed, and the Newton step off it has no new configuration to give
        (:meth:`_newton_from_computed`)."""
        self.max_steps = self.nsteps + 1
        self._stopped = WALK_FAILED if reason == "walk failed" else WALK_ON_COMPUTED
        self.step_log.notes(
            [
                f"the walk on the model ends on a configuration already computed ({reason}), "
                "whose forces are above fmax: the search stops there, not converged"
            ]
        )


def newton_step(hessian, basis, forces, radius):
    """The step (n, 3) towards the first-order saddle point of the quadratic of Hessian
    ``hessian`` (3n, 3n) and ``forces`` (n, 3) at its origin, in the coordinates of the
    orthonormal ``basis`` (3n, k) (the free ones less the rigid motions), and whether
    ``radius`` (Å, the largest atomic move) restricted it.

    Up along the lowest mode, down along the others: on the image surface, whose
    lowest curvature and force are turned over, the step ``f_i / (|k_i| + mu)`` along
    each mode ``i`` of curvature ``k_i`` and force ``f_i``, the Newton step where
    ``mu = 0`` keeps it within ``radius``, else the restricted step whose shift ``mu``
    puts it on ``radius`` (J. Nocedal and S. J. Wright, Numerical Optimization,
    Springer (2006), ch. 4; the image function of C. J. Cerjan and W. H. Miller,
    J. Chem. Phys. 75, 2800 (1981)): a flat mode then takes a step of ``f_i / mu``
    where its Newton step would take the whole radius."""
    curvatures, modes = np.linalg.eigh(basis.T @ hessian @ basis)  # (k,), (k, k)
    along = modes.T @ (basis.T @ np.asarray(forces).ravel())  # (k,)
    along[0] = -along[0]  # the image surface: up along the lowest mode
    curvatures = np.abs(curvatures)

    def step(shift):  # (n, 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            lengths = np.where(along == 0.0, 0.0, along / (curvatures + shift))  # (k,)
        return (basis @ (modes @ lengths)).reshape(np.shape(forces))

    newton = step(0.0)
    if np.isfinite(newton).all() and largest_norm(newton) <= radius:
        return newton, False
    low, high = 0.0, max(curvatures.max(), 1.0)
    while largest_norm(step(high)) > radius:
        high *= 2.0
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if largest_norm(step(middle)) > radius else (low, middle)
    return step(high), True
