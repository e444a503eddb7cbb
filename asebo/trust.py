"""The trust region of the Bayesian optimizer: how far from the best configuration to search.

The half-width of the search box doubles when the GP predicted the energy of its
proposal well and halves when it did not, as in trust-region methods (J. Nocedal and
S. J. Wright, "Numerical Optimization", Springer (2006), algorithm 4.1, with the
GP's prediction in place of the quadratic model).
"""

from dataclasses import dataclass

GROW = 2.0  # factor after a good prediction
SHRINK = 0.5  # factor after a poor one
GOOD = 0.5  # prediction error below GOOD x the predicted drop: a good prediction
FLOOR = 1e-3  # Å: the smallest radius
FORCE_STEP = 0.02  # Å: the shortest step along the forces


@dataclass(frozen=True)
class TrustRegion:
    """Half-width of the trust box, Å per coordinate, and its ceiling ``maxstep``.

    Immutable: :meth:`after` returns the region for the next step.
    """

    radius: float
    maxstep: float

    def after(self, best, predicted, energy):
        """The region after a proposal predicted at ``predicted`` eV came out at ``energy``.

        Parameters
        ----------
        best : float
            Lowest energy observed before the proposal, eV.
        predicted, energy : float
            The GP's energy of the proposal and the calculator's, eV.

        Returns
        -------
        TrustRegion
        """
        predicted_drop = best - predicted
        actual_drop = best - energy
        error = abs(energy - predicted)
        if actual_drop > 0 and error < GOOD * max(predicted_drop, 0.0):
            return TrustRegion(min(GROW * self.radius, self.maxstep), self.maxstep)
        if actual_drop <= 0 or error > predicted_drop:
            return self.shrunk()
        return self

    def shrunk(self):
        """The region halved (down to ``FLOOR``): after a poor prediction, or where the
        model cannot be evaluated at the edge of the box."""
        return TrustRegion(max(SHRINK * self.radius, FLOOR), self.maxstep)

    def for_force_step(self):
        """The region of a step along the forces, when the model has nothing new to offer.

        The radius is at least ``FORCE_STEP``: a step shorter than that would teach the
        model as little as the proposal it replaces.
        """
        return TrustRegion(min(max(self.radius, FORCE_STEP), self.maxstep), self.maxstep)
