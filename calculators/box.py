"""A wrapper that puts an isolated molecule into a vacuum box for a cell-based code."""

import numpy as np
from ase import Atoms
from ase.calculators.calculator import Calculator, all_changes


class MoleculeBoxCalculator(Calculator):
    """Compute an isolated molecule in a vacuum box without moving the user's atoms.

    Real-space codes such as GPAW need a cell. For each call, the wrapper copies
    the numbers and positions into a fresh ``Atoms`` with ``pbc=False``,
    translates the copy so that the mean of its positions sits at the centre of
    a box of lengths ``box_`` and passes the copy to the wrapped calculator.
    The user's ``Atoms`` keep their positions, cell and constraints.

    The energy of an isolated molecule is invariant under translation; on a
    real-space grid this holds up to the egg-box effect, which is small at
    converged grid spacings (for H2O with GPAW's PBE setups: about 3 meV at
    h = 0.2 Å, but about 0.1 eV at h = 0.25 Å). The returned energy
    ``E(x) = E_grid(x - mean(x) + box_ / 2)`` is exactly invariant and smooth,
    since the translation is linear in the positions; its gradient is
    ``g_i - mean_j g_j``, so the returned forces are the wrapped calculator's
    forces minus their mean (the net force, which only the egg-box effect
    makes nonzero).

    The box is chosen at the first call: per axis, twice the largest distance
    of an atom from the mean position plus ``vacuum``, so that every atom is at
    least ``vacuum`` from the walls. It is kept for later calls (GPAW then
    reuses its grid and wave functions) until an atom comes closer than
    ``vacuum / 2`` to a wall, when a new box is chosen the same way.

    Parameters
    ----------
    calc : ASE calculator
        The wrapped calculator (e.g. ``gpaw.GPAW(...)``).
    vacuum : float
        Vacuum in Å between the atoms and the box walls.

    Attributes
    ----------
    box_ : ndarray of shape (3,) or None
        Box lengths in Å of the last call.

    Raises
    ------
    ValueError
        From ``calculate`` when the atoms are periodic: the box is for
        isolated molecules only.

    References
    ----------
    E. Wong, J. Z. Kolter, "An SVD and derivative kernel approach to learning
    from geometric data", Section "Bayesian optimization": the DFT target
    (GPAW) of the energy minimisation is a molecule in vacuum.
    """

    implemented_properties = ("energy", "forces")

    def __init__(self, calc, vacuum=4.0):
        super().__init__()
        if not vacuum > 0:
            raise ValueError(f"vacuum must be a positive length in Å, got {vacuum}")
        self.calc = calc
        self.vacuum = float(vacuum)
        self.box_ = None

    @property
    def name(self):
        return f"boxed_{self.calc.name}"

    def todict(self):
        """Parameters of the wrapper and of the wrapped calculator."""
        inner = self.calc.todict() if hasattr(self.calc, "todict") else {}
        return {"vacuum": self.vacuum, "calculator": self.calc.name, **inner}

    def boxed(self, atoms):
        """The copy of ``atoms`` that the wrapped calculator sees.

        Parameters
        ----------
        atoms : ase.Atoms
            A molecule (``pbc`` all False).

        Returns
        -------
        ase.Atoms
            Same numbers, initial magnetic moments and charges; positions
            translated into the box; ``pbc=False``.
        """
        if atoms.pbc.any():
            raise ValueError(
                "MoleculeBoxCalculator is for isolated molecules; "
                "set atoms.pbc = False (the cell is ignored)"
            )
        relative = atoms.positions - atoms.positions.mean(axis=0)  # (n, 3)
        half_extent = np.abs(relative).max(axis=0)  # (3,)
        if self.box_ is None or np.any(half_extent + self.vacuum / 2 > self.box_ / 2):
            self.box_ = 2 * (half_extent + self.vacuum)  # (3,)
        return Atoms(
            numbers=atoms.numbers,
            positions=relative + self.box_ / 2,
            cell=np.diag(self.box_),
            pbc=False,
            magmoms=atoms.get_initial_magnetic_moments(),
            charges=atoms.get_initial_charges(),
        )

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        boxed = self.boxed(self.atoms)
        forces = np.array(self.calc.get_property("forces", boxed), dtype=float)  # (n, 3)
        self.results = {
            "energy": float(self.calc.get_property("energy", boxed)),
            "forces": forces - forces.mean(axis=0),
        }
