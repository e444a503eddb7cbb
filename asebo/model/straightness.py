r"""When a bend, or a whole molecule, counts as nearly straight: one definition.

A bend angle near 180° is no smooth coordinate (it moves away from 180° as the
displacement across the axis, ``|p|``, not as ``p^2``), and a dihedral about a
straight bend is undefined. Every part of the model that treats straight bends apart
takes its threshold from :data:`NEARLY_STRAIGHT`, widest last:

1. torsions fade out as one of their bends opens from ``torsion_fade_start`` (145°)
   towards ``torsion_fade_end`` (160°) (:class:`asebo.model.lindh.LindhModel`, and the
   internal coordinates of :mod:`asebo.model.internals`);
2. the Lindh prior takes the straight angle as the reference of a two-coordinated
   atom's bend wider than ``straight_reference`` (150°)
   (:class:`asebo.model.priors.RecentredLindh`): its torsions are already fading there;
3. a molecule counts as near-linear when the second singular value of its centred
   positions is below ``near_linear_ratio`` (0.15) times the first
   (:func:`is_near_linear`); for a symmetric triatomic with bend ``theta`` the ratio is
   ``cot(theta / 2) / sqrt(3)``, and 0.15 is a bend of 150.9°
   (:meth:`NearlyStraight.near_linear_bend`): past the prior's straight reference, so
   that every bend of a molecule judged near-linear is straight in its prior;
4. the internal-coordinate metric refuses a bonded bend from ``bonded_bend_limit``
   (160°) on, where the torsions about it have faded out
   (:class:`asebo.model.metric.InternalMetric`);
5. it leaves out of its features a bend (bonded or not) from ``left_out_bend`` (165°) on.

The order is checked when the definition is built.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NearlyStraight:
    """The thresholds of nearly straight bends and molecules (module docstring).

    Angles in radians.
    """

    torsion_fade_start: float = np.radians(145.0)
    straight_reference: float = np.radians(150.0)
    near_linear_ratio: float = 0.15
    torsion_fade_end: float = np.radians(160.0)
    bonded_bend_limit: float = np.radians(160.0)
    left_out_bend: float = np.radians(165.0)

    def __post_init__(self):
        order = [
            self.torsion_fade_start,
            self.straight_reference,
            self.near_linear_bend(),
            self.torsion_fade_end,
        ]
        if order != sorted(order) or not (
            self.torsion_fade_end <= self.bonded_bend_limit < self.left_out_bend
        ):
            raise ValueError(
                "nearly straight thresholds out of order: the torsions must start fading "
                "before the prior straightens a bend, a near-linear molecule's bends must "
                "be straight in the prior, and the internal metric must refuse a bonded "
                f"bend only where its torsions have faded out ({self})"
            )

    def near_linear_bend(self):
        """The bend (rad) of a symmetric triatomic at the ratio ``near_linear_ratio``:
        ``2 arccot(sqrt(3) ratio)``."""
        return float(2.0 * np.arctan2(1.0, np.sqrt(3.0) * self.near_linear_ratio))


NEARLY_STRAIGHT = NearlyStraight()


def is_near_linear(positions, ratio=NEARLY_STRAIGHT.near_linear_ratio):
    """Whether the atoms at ``positions`` (n, 3) lie close to a line.

    The second singular value of the centred positions (the spread across the
    molecule's axis) below ``ratio`` times the first (the spread along it): acetylene
    or CO2 rattled by 0.1 Å are near 0.07, bent triatomics above 0.25.
    """
    centred = positions - positions.mean(axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    return bool(s[1] < ratio * s[0])
