"""The Lindh model as the GP's prior mean, recentred as the optimization moves away.

:class:`RecentredLindh` builds a :class:`asebo.model.lindh.LindhModel` (R. Lindh,
A. Bernhardsson, G. Karlström, P.-Å. Malmqvist, Chem. Phys. Lett. 241, 423 (1995))
around the first configuration computed and rebuilds it around the lowest-energy
configuration once the model puts that configuration more than ``recentre`` eV above
its minimum: a harmonic expansion that far from its centre says more about the start
than about the way down. The rule is replayed over the observations in order, so a
resumed run rebuilds the model of the uninterrupted run.

A bend ``i-j-k`` at an atom ``j`` bonded to ``i`` and ``k`` only (an sp carbon:
acetylene, CO2, a nitrile, rattled; bonded meaning ``rho > BONDED``) wider than
``LINEAR_BEND`` is given the straight angle as reference: its angle moves away from 180° as
``|p|``, the displacement across the axis, so a harmonic term around a reference
of, say, 172° has a cusp at the straight geometry (``(180° - 172° - c|p|)^2``),
which no smooth GP can correct, while ``(c|p|)^2`` is smooth.

The prior's force constants are ``STIFFNESS`` = 0.7 times those of
:class:`asebo.model.lindh.LindhModel`: a softer model takes longer first steps. Measured
with GFN2-xTB and the internal-coordinate kernel on 110 molecules (the Baker set, the
two shipped drug-like sets and three sets built to check, docs/lindh.md): 728 force
calls in all at 1.0, 674 at 0.85, 690 at 0.75, 674 at 0.7 and 718 at 0.6; on 148
rattled G2 molecules 1105 at 0.85 and 1080 at 0.7.
"""

import numpy as np

from asebo.model.gp import CalculatorPrior
from asebo.model.lindh import (
    BEND_CONSTANT,
    BONDED,
    STRETCH_CONSTANT,
    TORSION_CONSTANT,
    LindhModel,
    lindh_weights,
)

STIFFNESS = 0.7  # the prior's force constants relative to the model's (module docstring)
LINEAR_BEND = np.radians(150.0)  # bends of a two-coordinated atom wider than this are straight


class RecentredLindh:
    """The Lindh-model prior of a sequence of observations.

    Parameters
    ----------
    atoms : ase.Atoms
        The molecule (numbers, cell) the prior evaluates.
    recentre : float
        Energy above the model's minimum, eV, beyond which the model is rebuilt.

    Attributes
    ----------
    model : LindhModel or None
        The current model, once an observation exists.
    centre : int or None
        Index of the observation the model is built around.
    """

    def __init__(self, atoms, recentre):
        self.atoms = atoms
        self.numbers = atoms.get_atomic_numbers()
        self.recentre = recentre
        self.model = None
        self.centre = None
        self._prior = None
        self._seen = 0  # observations the rule has been replayed over

    def prior(self, positions, energies):
        """The prior for observations ``positions`` (m, n, 3) and ``energies`` (m,).

        Returns a :class:`asebo.model.gp.CalculatorPrior` of the model, or ``'max'`` when no
        two atoms are bonded (the model would be zero; the constant prior is better).
        """
        while self._seen < len(energies):
            self._seen += 1
            best = int(np.argmin(energies[: self._seen]))
            if self.model is None:
                self._build(positions, 0)
            elif self.model.energy_and_forces(positions[best])[0] > self.recentre:
                self._build(positions, best)
        return self._prior

    def _build(self, positions, index):
        self.model = LindhModel(
            positions[index],
            self.numbers,
            stretch_constant=STIFFNESS * STRETCH_CONSTANT,
            bend_constant=STIFFNESS * BEND_CONSTANT,
            torsion_constant=STIFFNESS * TORSION_CONSTANT,
        )
        self.model._reference_angles = _straightened(self.model, positions[index], self.numbers)
        self.centre = index
        self._prior = (
            "max" if len(self.model.stretches) == 0 else CalculatorPrior(self.model, self.atoms)
        )


def _straightened(model, positions, numbers):
    """Reference angles (b,) of ``model``, with the near-straight bends of
    two-coordinated atoms set to 180 degrees."""
    bonded = lindh_weights(positions, numbers) > BONDED  # (n, n)
    i, j, k = model.bends.T  # (b,) each
    two_bonds = bonded[i, j] & bonded[j, k] & (bonded.sum(axis=1)[j] == 2)
    angles = model._reference_angles  # (b,)
    return np.where(two_bonds & (angles > LINEAR_BEND), np.pi, angles)
