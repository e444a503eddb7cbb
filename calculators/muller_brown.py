"""The Müller-Brown surface as an ASE calculator of one atom moving in x and y.

K. Müller and L. D. Brown, Theor. Chim. Acta 53, 75 (1979): a sum of four Gaussians
in the plane, with three minima and two saddles, the classic test of path methods.
The atom's x and y (Å) are the surface's coordinates; z feels no force.
"""

import numpy as np
from ase.calculators.calculator import Calculator, all_changes

AMPLITUDES = np.array([-200.0, -100.0, -170.0, 15.0])
A_XX = np.array([-1.0, -1.0, -6.5, 0.7])
A_XY = np.array([0.0, 0.0, 11.0, 0.6])
A_YY = np.array([-10.0, -10.0, -6.5, 0.7])
CENTRES = np.array([[1.0, 0.0], [0.0, 0.5], [-0.5, 1.5], [-1.0, 1.0]])  # (4, 2)

MINIMUM_A = (-0.558224, 1.441726)
"""The deepest minimum (-146.70 in the surface's units)."""
MINIMUM_B = (-0.050011, 0.466694)
"""The middle minimum (-80.77), joined to A by :data:`SADDLE_AB`."""
SADDLE_AB = (-0.822002, 0.624313)
"""The saddle between A and B, -40.665 in the surface's units."""


def muller_brown(xy):
    """Energy and gradient (2,) of the surface, in its own units, at ``xy`` (2,)."""
    d = np.asarray(xy, dtype=float) - CENTRES  # (4, 2)
    exponent = A_XX * d[:, 0] ** 2 + A_XY * d[:, 0] * d[:, 1] + A_YY * d[:, 1] ** 2
    terms = AMPLITUDES * np.exp(exponent)  # (4,)
    gradient = np.stack(
        [
            terms @ (2 * A_XX * d[:, 0] + A_XY * d[:, 1]),
            terms @ (A_XY * d[:, 0] + 2 * A_YY * d[:, 1]),
        ]
    )
    return float(terms.sum()), gradient


class MullerBrown(Calculator):
    """The Müller-Brown surface (Müller and Brown, Theor. Chim. Acta, 1979) for one atom.

    Parameters
    ----------
    scale : float
        eV per unit of the surface: the energy is ``scale * V(x, y)`` with x and y the
        atom's coordinates in Å.
    """

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, scale=0.01, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)

    def todict(self):
        return {"scale": self.scale}

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if len(self.atoms) != 1:
            raise ValueError(f"the Müller-Brown surface moves one atom, got {len(self.atoms)}")
        energy, gradient = muller_brown(self.atoms.positions[0, :2])
        forces = np.zeros((1, 3))
        forces[0, :2] = -self.scale * gradient
        self.results = {
            "energy": self.scale * energy,
            "free_energy": self.scale * energy,
            "forces": forces,
        }
