"""How :class:`asebo.neb.BONEB` chooses the image to compute next, and where.

The image the GP is least sure of, or the climbing image once every image is sure
enough (Koistinen, Dagbjartsdóttir, Ásgeirsson, Vehtari and Jónsson, J. Chem. Phys. 147,
152720 (2017); Garrido Torres, Jennings, Hansen, Boes and Bligaard, Phys. Rev. Lett. 122,
156001 (2019)); where every moving image is computed at its place and the band rests on
the model, an image moved as a whole along its calculator's net force and torque, or
stepped along its computed NEB force.
"""

import numpy as np
from scipy.spatial.distance import pdist

from asebo.neb.band import largest_forces
from asebo.neb.band_view import criteria
from asebo.neb.defaults import RELAXATION_ENDS
from asebo.neb.relax import model_band, relax_on_model
from asebo.optimize.rigid import moved_rigidly, rigid_move_length, rigid_part, rigid_step
from asebo.optimize.stages import newton_length, only_rigid_forces_left
from asebo.optimize.walk_trust import adapted_radius, largest_norm
from asebo.threads import limited_threads

LEAST_SURE = "least sure"
CLIMBING = "climbing image"
NOT_COMPUTED_HERE = "not computed here"
MOVED_AS_A_WHOLE = "moved as a whole"
STEPPED = "stepped along its NEB force"
REASONS = (LEAST_SURE, CLIMBING, NOT_COMPUTED_HERE, MOVED_AS_A_WHOLE, STEPPED)
"""Why an image is computed: the GP's standard deviation there is the largest and above
``uncertainty``; the climbing image, every image sure enough; the least sure image not
computed at its place, none above ``uncertainty``; moved as a whole along its
calculator's net force and torque, the band at rest on the model; stepped along its
computed NEB force, the band at rest on the model."""


class ImageChoice:
    """The relaxation of :class:`asebo.neb.BONEB`'s band on the model and its choice of
    the image to compute: a mixin of a driver with ``neb``, ``images``, ``positions``,
    ``fmax``, ``settings``, ``trust_radius``, ``record``, ``representation``,
    ``models``, ``band_optimizer``, ``_free``, ``_stopped``, ``_computed``, ``choices``,
    ``calls``, ``band_state()`` and ``_fitted()``; it computes the image chosen."""

    def _choice(self):
        """Relax the band on the GP unless its NEB forces are below their criteria; the
        moving image to compute next (0-based), the reason and how the relaxation ended.

        The images computed at their place whose NEB force is below its criterion, or
        would be but for its net force and torque (:meth:`_rigid_only`), are held while
        the others relax. Where every image is computed at its place after that, an
        image is moved before its call (:meth:`_moved_as_a_whole`, else
        :meth:`_stepped_along_band_force`): the band has not converged. Rank 0 alone."""
        state = self.band_state(every_rank=False)
        positions = self.positions
        band, forces = state.band_forces, state.values[1]
        settled = largest_forces(band) < criteria(self.neb, self.fmax)
        settled |= self._rigid_only(positions, forces, band)
        how, self._stopped = "band kept", False
        if not settled.all():
            held = state.computed & np.concatenate([[False], settled, [False]])
            values = list(zip(*state.values))
            model = model_band(self.neb, positions, self._fitted(), values, held)
            ended = relax_on_model(
                model,
                np.array(self.record.observations.positions),
                self.trust_radius,
                self.fmax / 5 if self.settings.model_fmax is None else self.settings.model_fmax,
                self.settings.model_steps,
                self.band_optimizer,
                held,
                self.settings.walk.bisections,
            )
            self._stopped = ended == "trust radius"
            how = RELAXATION_ENDS[ended]
            for image, moved in zip(self.images[1:-1], model.images[1:-1]):
                image.positions = moved.positions
            state = self.band_state(every_rank=False)
        positions, band, forces = self.positions, state.band_forces, state.values[1]
        if not state.computed[1:-1].all():
            moving = range(1, len(positions) - 1)
            _, std = self._fitted().predict(positions[1:-1], moving, return_std=True)
            climbing = (state.imax - 1) if self.neb.climb else None
            return (
                *pick_image(std, state.computed[1:-1], climbing, self.settings.uncertainty),
                how,
            )
        choice = self._moved_as_a_whole(positions, forces, band)
        if choice is None:
            choice = self._stepped_along_band_force(positions, band)
        return (*choice, how)

    def _values(self, positions):
        """Energies (i,), forces (i, n, 3) of the images at ``positions`` (i, n, 3): the
        computed ones where an image was computed there, the GP's elsewhere; and which
        were computed (i,)."""
        models, observations = self._fitted(), self.record.observations
        found = [self.record.find(where) for where in positions]
        computed = np.array([index is not None for index in found])
        energies, gradients = models.predict(positions, range(len(positions)), return_gradient=True)
        forces = -np.asarray(gradients)
        energies = np.array(energies, dtype=float)
        for image, index in enumerate(found):
            if index is not None:
                energies[image] = observations.energies[index]
                forces[image] = observations.forces[index]
        return energies, forces, computed

    def _stepped_along_band_force(self, positions, band):
        """Where every moving image is computed at its place and the band rests on the
        model with computed NEB forces above ``fmax``: the image of the largest one,
        moved along it, and why; None where every NEB force is below ``fmax``. Its largest
        atomic move is the trust radius, or less where the model's curvature along the
        force puts the minimum along it nearer
        (:func:`asebo.optimize.stages.newton_length`). ``positions`` (i, n, 3) are every
        image's, ``band`` (i - 2, n, 3) their computed NEB forces.

        The model's band rests where the model's NEB forces vanish; where the computed
        ones do not, the model smooths over what the calls show (a GP whose noise takes
        up a calculator's grid error, say), and no relaxation on it moves the band. A
        step along the computed force, as a plain NEB takes, adds the call the model
        lacks there; the trust radius then follows the model's error at it."""
        largest = largest_forces(band)  # (i - 2,)
        worst = int(np.argmax(largest))
        if largest[worst] < self.fmax:
            return None
        where = positions[worst + 1]  # (n, 3)
        gp = self._fitted().of(worst + 1)
        length = min(self.trust_radius, newton_length(gp, where, band[worst]))
        self.images[worst + 1].positions = where + length * band[worst] / largest[worst]
        return worst, STEPPED, {"length": float(length)}

    def _moved_as_a_whole(self, positions, forces, band):
        """Where every moving image is computed at its place and the band rests on the
        model: of the images that only their NEB force's net force and torque keep above
        ``fmax``, the one of the largest force, moved as a whole along the net force and
        torque of its computed forces, and why; None where there is none. ``positions``
        and ``forces`` (i, n, 3) are every image's, ``band`` (i - 2, n, 3) their NEB
        forces.

        A calculator on a grid (GPAW) gives a molecule's forces a net force and torque
        (the egg-box effect) that a rotation-invariant model cannot see, so no
        relaxation on the model removes them: the image moves rigidly by ``force_step``
        of :class:`asebo.optimize.settings.TrustSettings`, times ``rigid_shrink`` of
        :class:`asebo.optimize.settings.SpecialCases` for every call of its row of such
        moves after the lowest energy in it (:meth:`_rigid_row_energies`), as
        :class:`asebo.BOOptimizer` and :class:`asebo.BOSaddle` do.
        """
        rigid_only = self._rigid_only(positions, forces, band)
        if not rigid_only.any():
            return None
        worst = int(np.argmax(np.where(rigid_only, largest_forces(band), -np.inf)))
        where = positions[worst + 1]  # (n, 3)
        length = rigid_move_length(self._rigid_row_energies(worst + 1))
        translation, rotation = rigid_step(where, forces[worst + 1], length)
        self.images[worst + 1].positions = moved_rigidly(where, translation, rotation)
        return worst, MOVED_AS_A_WHOLE, {"length": float(length)}

    def _rigid_only(self, positions, forces, band):
        """Which moving images (i - 2,) only their calculator's net force and torque keep
        above ``fmax``: their NEB force meets ``fmax`` once its net force and torque are
        taken off, but not with them
        (:func:`asebo.optimize.stages.only_rigid_forces_left`, for a rotation-invariant
        model), and the net force and torque of their forces (the computed ones where
        computed at their place, the model's, which have none, elsewhere) are as large
        as what the NEB force exceeds ``fmax`` by. ``positions``, ``forces`` (i, n, 3),
        ``band`` (i - 2, n, 3).

        The second test leaves out a net force and torque of the NEB force that comes
        from the band, not the calculator: ASE's tangent and springs where an image is
        turned against its neighbours. A move along the calculator's net force and
        torque does not change that one, and the image would be moved again and again.
        """
        free = np.broadcast_to(self._free[:, None], positions.shape[1:])
        invariant = self.representation.invariant(self.models.metric)
        excess = largest_forces(band) - self.fmax  # (i - 2,)
        return np.array(
            [
                only_rigid_forces_left(where, force, self.fmax, free, invariant)
                and largest_norm(rigid_part(where, computed)) >= over
                for where, computed, force, over in zip(positions[1:-1], forces[1:-1], band, excess)
            ]
        )

    def _rigid_row_energies(self, image):
        """The energies of ``image``'s latest calls in a row that were rigid moves of the
        call before (every interatomic distance the same), and of the call they started
        from, in the order computed (:func:`asebo.optimize.rigid.rigid_move_length`)."""
        observations = self.record.observations
        calls = [at for at, index in enumerate(self.record.image_of) if index == image]
        count = 0
        for later, earlier in zip(calls[::-1], calls[-2::-1]):
            moved, start = observations.positions[later], observations.positions[earlier]
            if not np.allclose(pdist(moved), pdist(start), rtol=0.0, atol=1e-9):
                break
            count += 1
        return [observations.energies[at] for at in calls[-count - 1 :]]

    def _compute(self, moving, reason, details, how):
        """Call the calculator of moving image ``moving`` (0-based) at its place."""
        image = self.images[moving + 1]
        with limited_threads(self.threads):
            gp = self._fitted().of(moving + 1)
            energy, gradient = gp.predict(image.positions[None], return_gradient=True)
        predicted = -np.asarray(gradient)[0]  # (n, 3)
        try:  # an SCF that does not converge, NaN forces: raised with what to do
            computed, forces = self._computed.results(image)  # (), (n, 3)
            radius = adapted_radius(
                self.trust_radius,
                forces[self._free],
                predicted[self._free],
                self.fmax,
                self._stopped,
                self.settings.max_trust_radius,
                self.settings.walk,
            )
            choice = {"image": moving + 1, "reason": reason, **details, "relaxation": how}
            choice["predicted"] = float(np.asarray(energy).ravel()[0])
            saved = {"trust_radius": radius, "choices": [*self.choices, choice]}
            self.record.add(image, moving + 1, computed, forces, self.positions[1:-1], saved)
        except Exception as error:
            error.add_note(self.record.failure_note(moving + 1, self.calls))
            raise
        self.trust_radius = radius
        self.choices.append(choice)
        self.calls += 1


def pick_image(std, computed, climbing, uncertainty):
    """The moving image to compute (0-based), why (:data:`REASONS`) and the standard
    deviation behind it (a dict), of those not ``computed`` (i - 2,) at their place (at
    least one).

    The image not computed at its place where the GP's standard deviation ``std``
    (i - 2,) is largest, where that exceeds ``uncertainty`` (eV); else the climbing image
    if it is not computed there; else the least sure of those not computed.
    """
    std = np.where(computed, -np.inf, std)
    least_sure = int(np.argmax(std))
    if std[least_sure] > uncertainty:
        return least_sure, LEAST_SURE, {"std": float(std[least_sure])}
    if climbing is not None and not computed[climbing]:
        return int(climbing), CLIMBING, {}
    return least_sure, NOT_COMPUTED_HERE, {"std": float(std[least_sure])}


def describe(choice):
    """The log's words for a record of :attr:`BONEB.choices`."""
    std = f" (std {choice['std']:.3f} eV)" if "std" in choice else ""
    return f"image {choice['image']}: {choice['reason']}{std}; {choice['relaxation']}"
