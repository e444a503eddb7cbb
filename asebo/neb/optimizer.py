"""BONEB: a nudged elastic band relaxed on a GP of the energies and forces computed.

One GP (:class:`asebo.model.gp.EnergyForceGP`) learns every image ever computed, the
endpoints included, and takes its length scale from all of them (:data:`HYPER_WINDOW`);
beyond its dense covariance each moving image takes a GP of the calls nearest its own
latest (:class:`asebo.neb.image_models.ImageModels`).
Each outer step relaxes a copy of the band on the GP's posterior mean with ASE's own
NEB forces (tangent, springs, climbing image) and an ASE optimizer, within a trust
radius of the configurations computed (:func:`asebo.neb.relax.relax_on_model`; the
radius follows the model's force error at each call,
:func:`asebo.neb.trust_radius.adapted_radius`), then computes ONE image: the one where
the GP is least sure, or the climbing image once every image is sure enough (Koistinen,
Dagbjartsdóttir, Ásgeirsson, Vehtari and Jónsson, J. Chem. Phys. 147, 152720 (2017),
the one-image-evaluated variant; Garrido Torres, Jennings, Hansen, Boes and Bligaard,
Phys. Rev. Lett. 122, 156001 (2019), the uncertainty and the climbing image). Where
the NEB forces of the band (the computed values where an image was computed at its
place, the GP's elsewhere) are already below ``fmax``, the band is kept as it is and
its images not yet computed are computed there. The band has converged when every
moving image has been computed at its place and ASE's NEB forces on those computed
energies and forces are below ``fmax``, the climbing image's included.
"""

import time

import numpy as np
from ase.optimize import FIRE
from ase.optimize.optimize import DEFAULT_MAX_STEPS
from ase.parallel import broadcast, world
from ase.utils import IOContext
from scipy.spatial.distance import pdist

from asebo.model.prior_names import AUTO
from asebo.model.priors import automatic_prior, resolve_prior
from asebo.neb.band import band_forces, largest_forces
from asebo.neb.checks import check_band, positive
from asebo.neb.image_models import ImageModels
from asebo.neb.record import BandRecord
from asebo.neb.relax import model_band, relax_on_model
from asebo.neb.trust_radius import adapted_radius, largest_norm
from asebo.optimize.observed_atoms import ComputedResults
from asebo.optimize.restart_lock import RestartLock
from asebo.optimize.rigid import moved_rigidly, rigid_move_length, rigid_part, rigid_step
from asebo.optimize.stages import newton_length, only_rigid_forces_left
from asebo.optimize.surrogate_model import default_surrogate, refit

MOLECULE_PRIOR = "max"
"""The prior of a molecule's band where GFN2-xTB cannot be its prior
(:func:`molecule_band_prior`): the highest energy computed. The Lindh model around one
configuration (BOOptimizer's default) is far off across a reaction (a band on it and the
internal coordinates, measured: docs/notes/molecular-bands.md)."""
MOLECULE_KERNEL = "inverse"
"""The default kernel of a molecule's band of three atoms or more: the Gaussian kernel on
the inverse distances of every pair of atoms
(:class:`asebo.optimize.representations.InverseDistancePositions`), which needs no
reference configuration across a reaction; two atoms take Cartesian positions."""

HYPER_WINDOW = 10**6
"""The observations whose marginal likelihood gives a band's GP its length scale: every
one, up to half of the GP's ``max_size`` rows, where a relaxation takes the latest dozen
(:class:`asebo.model.gp.EnergyForceGP`): a band's calls spread over its images, and the
latest dozen hold two or three of each."""


class BONEB(IOContext):
    """A nudged elastic band optimized on a GP surrogate (module docstring).

    Parameters
    ----------
    neb : ase.mep.NEB
        The band, ``climb=True`` for the saddle. Every image needs a calculator: the
        endpoints' energies and forces are computed once (taken from their calculators'
        results where these hold them), the moving images' calculators are called.
        ``FixAtoms`` only, the same in every image.
    restart : str, optional
        JSON file of every image computed (which image, positions, energy, forces) and
        of the band, written after each call; read if it exists, so that a band stopped
        at any moment resumes without a repeated call.
    logfile : file, str or None
        ``'-'`` for standard output: a line per call (step, image, energy, the image's
        NEB fmax, why this image).
    trajectory : str, optional
        ASE trajectory of every image computed, with its energy and forces, in the order
        computed (the endpoints first); the converged band is ``neb.images``.
    prior, kernel : optional
        The GP's prior mean and representation, as for
        :class:`asebo.optimize.optimizer.BOOptimizer`, chosen for the first moving
        image. Defaults: as BOOptimizer's for a periodic cell (pair springs, the
        periodic kernel); for a molecule :data:`MOLECULE_KERNEL` and the prior of
        :func:`molecule_band_prior`: GFN2-xTB under another calculator (GPAW, say),
        :data:`MOLECULE_PRIOR` under tblite itself. ``prior='auto'`` is the default.
    trust_radius : float
        Å, the first trust radius: no image of the band relaxed on the GP goes further
        than this from the configurations computed (or from its place before the
        relaxation). It follows the model's force error at each call
        (:func:`asebo.neb.trust_radius.adapted_radius`); a restart file's radius is
        taken over.
    max_trust_radius : float
        Å, the largest the trust radius grows to.
    uncertainty : float
        eV: the GP's standard deviation above which an image is computed before the
        climbing image.
    model_fmax : float, optional
        eV/Å, the NEB forces the band is relaxed to on the GP; default ``fmax / 5``.
    model_steps : int
        Steps of ``band_optimizer`` per relaxation on the GP at most.
    band_optimizer : ase optimizer class
        What relaxes the band on the GP (FIRE, BFGS...).
    gp_options : dict, optional
        Passed to :class:`asebo.model.gp.EnergyForceGP`, over ``hyper_window``
        :data:`HYPER_WINDOW` and ``cg_max_iter`` 0: beyond the GP's dense covariance
        each image takes the GP of the calls nearest its own latest
        (:class:`asebo.neb.image_models.ImageModels`), not conjugate gradients over
        every call, which seldom converge there and take most of the time.
    comm : communicator
        Ranks that run the band together (GPAW's): rank 0 relaxes it on the GP and
        chooses the image, every rank computes that image; rank 0 alone writes.
    """

    def __init__(
        self,
        neb,
        restart=None,
        logfile="-",
        trajectory=None,
        prior=None,
        kernel=None,
        trust_radius=0.2,
        max_trust_radius=0.5,
        uncertainty=0.05,
        model_fmax=None,
        model_steps=400,
        band_optimizer=FIRE,
        gp_options=None,
        comm=world,
    ):
        check_band(neb)
        self.neb, self.images = neb, neb.images
        moving = self.images[1]
        periodic = bool(np.any(moving.pbc))
        self.prior_choice = None  # why the default prior, for the log
        if not periodic:  # a band leaves the harmonic well of any one configuration
            prior, self.prior_choice = molecule_band_prior(prior, moving)
            if kernel is None:
                kernel = MOLECULE_KERNEL if len(moving) >= 3 else "cartesian"
        gp_options = {"hyper_window": HYPER_WINDOW, "cg_max_iter": 0, **(gp_options or {})}
        self.representation, self.prior, gp, _ = default_surrogate(
            prior, kernel, moving, periodic, gp_options
        )
        self.models = ImageModels(gp, len(self.images))
        self.trust_radius = positive("trust_radius", trust_radius)
        self.max_trust_radius = positive("max_trust_radius", max_trust_radius)
        self.uncertainty = positive("uncertainty", uncertainty)
        self.model_fmax = None if model_fmax is None else positive("model_fmax", model_fmax)
        self.model_steps = int(positive("model_steps", model_steps))
        self.band_optimizer = band_optimizer
        self.numbers = moving.get_atomic_numbers()
        self._free = np.ones(len(moving), dtype=bool)  # (n,): the atoms the band moves
        for constraint in moving.constraints:  # FixAtoms alone (check_band)
            self._free[constraint.index] = False
        self._computed = ComputedResults()  # the force-consistent energy where given
        self.comm = comm
        self.restart = restart
        self.closelater(RestartLock.acquire(restart, comm))  # before any file is opened
        self.record = BandRecord(self.images, restart, trajectory, comm)
        comm.barrier()  # every rank has read the restart file (or found none) before any writes
        if self.record.band is not None:
            for image, positions in zip(self.images[1:-1], self.record.band):
                image.positions = positions
            self.trust_radius = float(self.record.observations.state["trust_radius"])
        self.logfile = self.openfile(file=logfile, comm=comm, mode="a")
        self._fit = None  # (observations counted, metric) of the last fit
        self._stopped = False  # whether the trust radius stopped the last relaxation
        self.calls = 0  # calls of the moving images' calculators by this object

    def close(self):
        """Close the log and the trajectory."""
        self.record.close()
        super().close()

    @property
    def positions(self):
        """Every image's positions (i, n, 3), the endpoints included."""
        return np.array([image.positions for image in self.images])

    @property
    def nsteps(self):
        """The calls of the moving images in the restart file and since."""
        return sum(index not in (0, len(self.images) - 1) for index in self.record.image_of)

    def run(self, fmax=0.05, steps=DEFAULT_MAX_STEPS):
        """Optimize the band until its computed NEB forces are below ``fmax`` (eV/Å), or
        ``steps`` calls of the moving images; return whether it converged."""
        self.fmax = fmax
        if self.prior_choice is not None:
            self._note(self.prior_choice)
        self._endpoints()
        done = 0
        while not self.converged():
            if done >= steps:
                return False
            self._compute(*self._choose())
            done += 1
        return True

    def converged(self):
        """Whether every moving image was computed at its place and ASE's NEB forces on
        those energies and forces are below ``fmax``; no call."""
        found = [self.record.find(positions) for positions in self.positions]
        if any(index is None for index in found):
            return False
        observations = self.record.observations
        energies = np.array([observations.energies[index] for index in found])
        forces = np.array([observations.forces[index] for index in found])
        band, _ = band_forces(self.neb, self.positions, energies, forces)
        return bool(largest_forces(band).max() < self.fmax)

    def _endpoints(self):
        """Compute the endpoints once (from their calculators' results where held)."""
        last = len(self.images) - 1
        for index in (0, last):
            image = self.images[index]
            if self.record.find(image.positions) is None:
                energy, forces = self._computed.results(image)  # (), (n, 3)
                band = self.positions[1:-1]
                self.record.add(image, index, energy, forces, band, self.trust_radius)
                self._log(index, energy, None, "endpoint")

    def _fitted(self):
        """The GP of each image fitted to every image computed (fitted again only after
        a new one): beyond the GP's ``max_size`` rows, each moving image's conditions on
        the configurations nearest to its own latest call."""
        observations = self.record.observations
        if self._fit is not None and self._fit[0] == len(observations):
            return self.models
        latest = self._latest_of_images()
        self._fit = refit(
            self.models.pooled,
            self.prior,
            self.representation,
            self.numbers,
            observations,
            self._fit,
            sorted(latest.values()) or None,
        )
        self.models.condition(len(observations), latest)
        return self.models

    def _latest_of_images(self):
        """Each computed moving image's latest call: image -> observation index."""
        last = len(self.images) - 1
        latest = {image: at for at, image in enumerate(self.record.image_of)}
        return {image: at for image, at in sorted(latest.items()) if image not in (0, last)}

    def _values(self, positions):
        """Energies (i,), forces (i, n, 3) of the images at ``positions`` (i, n, 3): the
        computed ones where an image was computed there, the GP's elsewhere; and which
        were computed (i,)."""
        models, observations = self._fitted(), self.record.observations
        found = [self.record.find(where) for where in positions]
        computed = np.array([index is not None for index in found])
        images = range(len(positions))
        energies, gradients = models.predict(positions, images, return_gradient=True)
        forces = -np.asarray(gradients)
        energies = np.array(energies, dtype=float)
        for image, index in enumerate(found):
            if index is not None:
                energies[image] = observations.energies[index]
                forces[image] = observations.forces[index]
        return energies, forces, computed

    def _choose(self):
        """:meth:`_choice` on rank 0, broadcast: every rank moves its images to rank 0's
        band and computes the same image."""
        if self.comm.rank == 0:
            chosen = (self._choice(), self.positions[1:-1], self._stopped)
        else:
            chosen = None
        choice, band, self._stopped = broadcast(chosen, root=0, comm=self.comm)
        for image, positions in zip(self.images[1:-1], band):
            image.positions = positions
        return choice

    def _choice(self):
        """Relax the band on the GP unless its NEB forces are below ``fmax``; the moving
        image to compute next (0-based) and why.

        The images computed at their place whose NEB force is below ``fmax``, or would
        be but for its net force and torque (:meth:`_moved_as_a_whole`), are held while
        the others relax. Where every image is computed at its place after that, an
        image is moved before its call (:meth:`_moved_as_a_whole`, else
        :meth:`_stepped_along_band_force`): the band has not converged."""
        positions = self.positions
        energies, forces, computed = self._values(positions)
        band, climbing = band_forces(self.neb, positions, energies, forces)
        settled = (largest_forces(band) < self.fmax) | self._rigid_only(positions, forces, band)
        below = np.concatenate([[False], settled, [False]])
        how, self._stopped = "band kept", False
        if not below[1:-1].all():
            held = computed & below
            values = list(zip(energies, forces))
            model = model_band(self.neb, positions, self._fitted(), values, held)
            ended = relax_on_model(
                model,
                np.array(self.record.observations.positions),
                self.trust_radius,
                self.fmax / 5 if self.model_fmax is None else self.model_fmax,
                self.model_steps,
                self.band_optimizer,
                held,
            )
            self._stopped = ended == "trust radius"
            how = RELAXATION_ENDS[ended]
            for image, moved in zip(self.images[1:-1], model.images[1:-1]):
                image.positions = moved.positions
            positions = self.positions
            energies, forces, computed = self._values(positions)
            band, climbing = band_forces(self.neb, positions, energies, forces)
        choice = None
        if not computed[1:-1].all():
            moving = range(1, len(positions) - 1)
            _, std = self._fitted().predict(positions[1:-1], moving, return_std=True)
            choice = _pick(std, computed[1:-1], climbing, self.uncertainty, how)
        if choice is None:
            choice = self._moved_as_a_whole(positions, forces, band, how)
        if choice is None:
            choice = self._stepped_along_band_force(positions, band, how)
        return choice

    def _stepped_along_band_force(self, positions, band, how):
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
        return worst, (
            f"stepped {length:.3g} Å along its computed NEB force, the model's band at rest; {how}"
        )

    def _moved_as_a_whole(self, positions, forces, band, how):
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
        return worst, f"moved as a whole along its net force and torque; {how}"

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

    def _compute(self, moving, reason):
        """Call the calculator of moving image ``moving`` (0-based) at its place."""
        image = self.images[moving + 1]
        gp = self._fitted().of(moving + 1)
        _, gradient = gp.predict(image.positions[None], return_gradient=True)
        predicted = -np.asarray(gradient)[0]  # (n, 3)
        try:
            energy, forces = self._computed.results(image)  # (), (n, 3)
        except Exception as error:  # an SCF that does not converge, say: raised as it is
            error.add_note(self._failure_note(moving + 1))
            raise
        self.trust_radius = adapted_radius(
            self.trust_radius,
            forces[self._free],
            predicted[self._free],
            self.fmax,
            self._stopped,
            self.max_trust_radius,
        )
        self.record.add(image, moving + 1, energy, forces, self.positions[1:-1], self.trust_radius)
        self.calls += 1
        energies, forces, _ = self._values(self.positions)
        band, _ = band_forces(self.neb, self.positions, energies, forces)
        self._log(moving + 1, energy, largest_forces(band)[moving], reason)

    def _failure_note(self, image):
        """What a user can do after the calculator of ``image`` failed."""
        where = f"BONEB: the calculator of image {image} failed after {self.nsteps} calls"
        if self.restart is None:
            return f"{where}; pass restart='band.json' to keep the calls of a band"
        return (
            f"{where}, every one of which is in {self.restart}: fix the calculator and "
            f"run again with restart={str(self.restart)!r} to go on without repeating one"
        )

    def _log(self, image, energy, fmax, reason):
        """A line per call: step, time, image, energy, the image's NEB fmax, reason."""
        if self.logfile is None:
            return
        if not getattr(self, "_header", False):
            self.logfile.write(
                f"BONEB:  {'Step':>4} {'Time':>8} {'Image':>5} {'Energy':>15} "
                f"{'NEB fmax':>10}  Reason\n"
            )
            self._header = True
        now = time.strftime("%H:%M:%S")
        shown = " " * 10 if fmax is None else f"{fmax:10.4f}"
        self.logfile.write(
            f"BONEB:  {self.nsteps:4d} {now} {image:5d} {energy:15.6f} {shown}  {reason}\n"
        )
        self.logfile.flush()

    def _note(self, note):
        """A line in the log."""
        if self.logfile is not None:
            self.logfile.write(f"BONEB: {note}\n")


RELAXATION_ENDS = {
    "model fmax": "band relaxed on the model",
    "steps": "band relaxed on the model",
    "trust radius": "band stopped at the trust radius",
    "prior failed": "band stopped where the prior calculator failed",
}
"""The log's words for each end of :func:`asebo.neb.relax.relax_on_model`."""


def molecule_band_prior(prior, moving):
    """The prior of a molecule's band for BONEB's ``prior`` argument, and why (or None).

    None and ``'auto'`` take GFN2-xTB (tblite) as the prior where
    :func:`asebo.model.priors.automatic_prior` takes it (a target other than tblite,
    elements GFN2-xTB describes): the GP then learns the target's difference to it, and
    the prior gives the stiff bonds one length scale cannot. Elsewhere they take
    :data:`MOLECULE_PRIOR`. Any other ``prior`` is returned as it is.

    Parameters
    ----------
    prior : None, str, float, ase calculator or Prior
    moving : ase.Atoms
        A moving image, with the target calculator.

    Returns
    -------
    prior : str, float, ase calculator or Prior
    why : str or None
        A line for the log where ``prior`` was None or ``'auto'``.
    """
    if prior is not None and not (isinstance(prior, str) and prior == AUTO):
        return prior, None
    choice, reason = automatic_prior(moving)
    if choice == "gfn2":
        return resolve_prior(choice), f"prior: {reason}"
    return MOLECULE_PRIOR, f"prior: the highest energy computed ({reason})"


def _pick(std, computed, climbing, uncertainty, how):
    """The moving image to compute (0-based) and why, of those not ``computed`` (i - 2,)
    at their place (at least one).

    The image not computed at its place where the GP's standard deviation ``std``
    (i - 2,) is largest, where that exceeds ``uncertainty`` (eV); else the climbing image
    if it is not computed there; else the least sure of those not computed.
    """
    std = np.where(computed, -np.inf, std)
    least_sure = int(np.argmax(std))
    if std[least_sure] > uncertainty:
        return least_sure, f"least sure (std {std[least_sure]:.3f} eV); {how}"
    if climbing is not None and not computed[climbing]:
        return int(climbing), f"climbing image; {how}"
    return least_sure, f"not computed here (std {std[least_sure]:.3f} eV); {how}"
