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
    Observations,
    RestartError,
    calculator_identity,
    check_calculator,
    check_restart,
)


class BandRecord:
    """Every image computed for a band, persisted after each call.

    Parameters
    ----------
    images : list of ase.Atoms
        The band's images; the record of a restart file of other atoms is refused.
    restart : str or None
        JSON file: read if it exists (the band's moving images are set to the stored
        band), written after each call.
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
        if check_restart(restart) is None:
            self.observations = Observations(numbers, restart, comm)
            self.image_of, self.band = [], None
        else:
            self.observations = Observations.load(numbers, restart, comm)
            state = self.observations.state
            check_calculator(restart, state.get("calculator"), identity)
            self.image_of = [int(index) for index in state.get("images", [])]
            if len(self.image_of) != len(self.observations):
                raise RestartError(f"restart file {restart} is not a band's: pass another name")
            self.band = np.asarray(state["band"], dtype=float) if "band" in state else None
        self.observations.state["calculator"] = identity
        self.trajectory = None
        if trajectory is not None and comm.rank == 0:
            mode = "a" if len(self.observations) else "w"
            self.trajectory = Trajectory(trajectory, mode)

    def find(self, positions):
        """The observation at ``positions`` (n, 3), or None."""
        return self.observations.find(positions)

    def add(self, image, index, energy, forces, band, trust_radius):
        """Record the call at ``image`` (ase.Atoms, image ``index``), save the restart file
        with the moving images ``band`` (i - 2, n, 3), write the trajectory frame."""
        self.observations.append(image.positions, energy, forces)
        self.image_of.append(int(index))
        self.band = np.array(band)
        self.observations.save(images=self.image_of, band=self.band, trust_radius=trust_radius)
        if self.trajectory is not None:
            frame = image.copy()
            frame.calc = SinglePointCalculator(
                frame, energy=float(energy), free_energy=float(energy), forces=np.array(forces)
            )
            self.trajectory.write(frame)

    def close(self):
        """Close the trajectory."""
        if self.trajectory is not None:
            self.trajectory.close()
