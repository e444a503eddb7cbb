"""The band's record: every image computed, its restart file and its trajectory.

:class:`BandRecord` keeps each computed image (which image, positions, energy,
unconstrained forces) in an :class:`asebo.optimize.observations.Observations`, whose
JSON restart file is written atomically after each call together with the band's
moving images, so that a band killed at any moment resumes where the last call left
it, without a repeated call. The trajectory receives each computed image once, with
its energy and forces, in the order computed.
"""

import numpy as np
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io.trajectory import Trajectory
from ase.parallel import world

from asebo.optimize.observations import (
    SAME_START,
    Observations,
    RestartError,
    calculator_identity,
    check_calculator,
    check_restart,
    held_elsewhere,
    held_error,
    system_of,
)
from asebo.optimize.subspace import free_atoms


class BandRecord:
    """Every image computed for a band, persisted after each call.

    Parameters
    ----------
    images : list of ase.Atoms
        The band's images; the record of a restart file of other atoms is refused.
    restart : str or None
        JSON file: read if it exists, written after each call. The file of another
        band is refused (:class:`asebo.optimize.observations.RestartError`): other
        atoms, boundary conditions or cell, another calculator, another number of
        images, or endpoints more than
        :data:`asebo.optimize.observations.SAME_START` Å from the file's.
    trajectory : str or None
        ASE trajectory of the computed images, appended to when the restart file is read.

    Attributes
    ----------
    observations : asebo.optimize.observations.Observations
    image_of : list of int
        The image of each observation.
    band : array (i - 2, n, 3) or None
        The moving images of the last band saved.
    """

    def __init__(self, images, restart=None, trajectory=None, comm=world):
        numbers = images[0].get_atomic_numbers()
        identity = calculator_identity(images[1].calc)
        system = system_of(images[0])
        if check_restart(restart) is None:
            self.observations = Observations(numbers, restart, comm, "band", system)
            self.image_of, self.band = [], None
        else:
            self.observations = Observations.load(numbers, restart, comm, "band", system)
            state = self.observations.state
            check_calculator(restart, state.get("calculator"), identity)
            self.image_of = [int(index) for index in state.get("images", [])]
            if len(self.image_of) != len(self.observations) or "band" not in state:
                raise RestartError(f"restart file {restart} is not a band's: pass another name")
            self.band = np.asarray(state["band"], dtype=float)
            check_same_band(restart, state, images)
            check_held_images(restart, self.observations, self.image_of, images)
        self.observations.state["calculator"] = identity
        self.observations.state["endpoints"] = np.array([images[0].positions, images[-1].positions])
        self.trajectory = None
        if trajectory is not None and comm.rank == 0:
            mode = "a" if len(self.observations) else "w"
            self.trajectory = Trajectory(trajectory, mode)

    def find(self, positions):
        """The observation at ``positions`` (n, 3), or None."""
        return self.observations.find(positions)

    def add(self, image, index, energy, forces, band, state):
        """Record the call at ``image`` (ase.Atoms, image ``index``), save the restart file
        with the moving images ``band`` (i - 2, n, 3) and the driver's ``state`` (a dict
        with its ``trust_radius``), write the trajectory frame.

        Raises
        ------
        FloatingPointError
            For an energy or forces that are not finite: nothing is recorded, the
            restart file keeps every call before.
        """
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            raise FloatingPointError(
                f"the calculator of image {index} returned NaN or inf energy or forces; "
                f"the {len(self.observations)} calls before are kept"
            )
        self.observations.append(image.positions, energy, forces)
        self.image_of.append(int(index))
        self.band = np.array(band)
        self.observations.save(images=self.image_of, band=self.band, **state)
        if self.trajectory is not None:
            frame = image.copy()
            frame.calc = SinglePointCalculator(
                frame, energy=float(energy), free_energy=float(energy), forces=np.array(forces)
            )
            self.trajectory.write(frame)

    def highest_computed(self, images):
        """The highest-energy moving image of ``images`` (the band's) computed at its
        place; ValueError where none was."""
        found = [self.find(image.positions) for image in images[1:-1]]
        energies = self.observations.energies
        computed = [(energies[i], k) for k, i in enumerate(found) if i is not None]
        if not computed:
            raise ValueError("no moving image of the band was computed at its place: run it")
        return images[1 + max(computed)[1]]

    def failure_note(self, image, calls):
        """What a user can do after the calculator of ``image`` failed, ``calls`` calls of
        the moving images into the run."""
        where = f"BONEB: the calculator of image {image} failed after {calls} calls"
        restart = self.observations.path
        if restart is None:
            return f"{where}; pass restart='band.json' to keep the calls of a band"
        return (
            f"{where}, every call before it is in {restart}, which it left as it was: "
            f"fix the calculator and run again with restart={restart!r} to go on "
            "without repeating one"
        )

    def close(self):
        """Close the trajectory."""
        if self.trajectory is not None:
            self.trajectory.close()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


def check_held_images(path, observations, image_of, images):
    """Refuse the restart file ``path`` where an image computed (of ``observations``,
    the image of each ``image_of``) does not hold the atoms its image's constraints hold
    where ``images`` have them (:func:`asebo.optimize.observations.held_elsewhere`): a
    band computed without this band's constraints."""
    free = free_atoms(images[1])  # (n, 3), the same on every image (BONEB's check)
    for k, (positions, index) in enumerate(zip(observations.positions, image_of)):
        image = images[index]
        found = held_elsewhere([positions], image.positions, free, image.cell, image.pbc)
        if found is not None:
            raise held_error(path, k, *found[1:])


def check_same_band(path, state, images):
    """Refuse the restart file ``path`` whose ``state`` holds another band than
    ``images``: another number of moving images, or endpoints more than
    :data:`asebo.optimize.observations.SAME_START` Å (any coordinate) from its own.
    Files written before the endpoints were recorded pass on the number of images."""
    band = np.asarray(state["band"])
    if len(band) != len(images) - 2:
        raise RestartError(
            f"restart file {path} holds a band of {len(band)} moving images, not "
            f"{len(images) - 2}: pass the same band to resume, or another restart file name "
            "to start afresh; this one was left untouched"
        )
    stored = state.get("endpoints")
    if stored is None:
        return
    given = np.array([images[0].positions, images[-1].positions])
    distance = float(np.abs(given - np.asarray(stored, dtype=float)).max())
    if distance > SAME_START:
        raise RestartError(
            f"restart file {path} holds a band between other endpoints ({distance:.3g} Å "
            "apart, largest coordinate difference): pass the same endpoints to resume, or "
            "another restart file name to start afresh; this one was left untouched"
        )
