"""A wrapper that puts an isolated molecule into a vacuum box for a cell-based code."""

import numpy as np
from ase import Atoms
from ase.calculators.calculator import Calculator, all_changes


class MoleculeBoxCalculator(Calculator):
    r"""Compute an isolated molecule in a vacuum box without moving the user's atoms.

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

    The grid also breaks rotations: the forces keep a torque, a few hundredths of
    an eV/Å for water at h = 0.2 Å, which no relaxation of the molecule's shape
    removes. With ``align=True`` the copy is also rotated onto the orientation of
    the first call (the reference ``r``) by the rotation ``R(x)`` of Kabsch's
    alignment, so the returned energy ``E(x) = E_grid(R(x) c(x) + box_ / 2)``, with
    ``c`` the positions minus their mean, is invariant under rotations as well,
    and smooth where the alignment is unique. Its gradient follows from the
    alignment's condition ``sum_i y_i x r_i = 0`` on the aligned positions
    ``y = R c``: with the grid's gradient ``g`` at ``y``, the torque
    ``tau = sum_i y_i x g_i`` and ``M = S - tr(S) I`` for ``S = sum_i y_i r_i^T``,

    .. math:: \nabla_{x_i} E = G_i - \frac{1}{n} \sum_j G_j, \qquad
              G_i = R^T (g_i + \eta \times r_i), \qquad M^T \eta = \tau,

    which is the grid's gradient without its torque where ``y = r``.

    The box is chosen at the first call: per axis, twice the largest distance
    of an atom from the mean position plus ``vacuum``, so that every atom is at
    least ``vacuum`` from the walls. It is kept for later calls (GPAW then
    reuses its grid and wave functions) until an atom comes closer than
    ``vacuum / 2`` to a wall, when a new box is chosen the same way. ``box`` gives
    the first box instead: the images of a nudged elastic band, each with its own
    calculator, take one box (:func:`band_box`), since two boxes give the same
    configuration energies apart by the grid's and the walls' effects (up to 0.07 eV
    for HCN in GPAW's LCAO mode at h = 0.2 Å and 4 Å of vacuum), which no model of
    one energy surface can fit.

    Parameters
    ----------
    calc : ASE calculator
        The wrapped calculator (e.g. ``gpaw.GPAW(...)``).
    vacuum : float
        Vacuum in Å between the atoms and the box walls.
    align : bool
        Also rotate each configuration onto the orientation of the first one.
    box : array (3,), optional
        Å, the box lengths of the first call (a new box is chosen as above where an
        atom comes closer than ``vacuum / 2`` to a wall).

    Attributes
    ----------
    box_ : ndarray of shape (3,) or None
        Box lengths in Å of the last call.
    reference_ : ndarray of shape (n, 3) or None
        With ``align``: the centred positions of the first call (of the first with
        another number of atoms, when that changes).

    Raises
    ------
    ValueError
        From ``calculate`` when the atoms are periodic: the box is for
        isolated molecules only.

    References
    ----------
    E. Wong, J. Z. Kolter, "An SVD and derivative kernel approach to learning
    from geometric data", Section "Bayesian optimization": the DFT target
    (GPAW) of the energy minimisation is a molecule in vacuum. W. Kabsch, Acta
    Cryst. A 32, 922 (1976) (the alignment).
    """

    implemented_properties = ("energy", "forces")

    def __init__(self, calc, vacuum=4.0, align=False, box=None):
        super().__init__()
        if not vacuum > 0:
            raise ValueError(f"vacuum must be a positive length in Å, got {vacuum}")
        self.calc = calc
        self.vacuum = float(vacuum)
        self.align = bool(align)
        self.box_ = None if box is None else checked_box(box)
        self.reference_ = None

    @property
    def name(self):
        return f"boxed_{self.calc.name}"

    def todict(self):
        """Parameters of the wrapper and of the wrapped calculator."""
        inner = self.calc.todict() if hasattr(self.calc, "todict") else {}
        return {"vacuum": self.vacuum, "align": self.align, "calculator": self.calc.name, **inner}

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
            translated into the box (with ``align``, rotated first); ``pbc=False``.
        """
        return self._boxed(atoms)[0]

    def _boxed(self, atoms):
        """:meth:`boxed`'s copy, with the positions (n, 3) relative to the box centre
        and the rotation (3, 3) applied to the centred positions."""
        if atoms.pbc.any():
            raise ValueError(
                "MoleculeBoxCalculator is for isolated molecules; "
                "set atoms.pbc = False (the cell is ignored)"
            )
        relative, rotation = self._centred(atoms)  # (n, 3), (3, 3)
        half_extent = np.abs(relative).max(axis=0)  # (3,)
        if self.box_ is None or np.any(half_extent + self.vacuum / 2 > self.box_ / 2):
            self.box_ = 2 * (half_extent + self.vacuum)  # (3,)
        copy = Atoms(
            numbers=atoms.numbers,
            positions=relative + self.box_ / 2,
            cell=np.diag(self.box_),
            pbc=False,
            magmoms=atoms.get_initial_magnetic_moments(),
            charges=atoms.get_initial_charges(),
        )
        return copy, relative, rotation

    def _centred(self, atoms):
        """The positions (n, 3) the box holds, relative to its centre, and the rotation
        (3, 3) applied to the centred positions (the identity without ``align``)."""
        centred = atoms.positions - atoms.positions.mean(axis=0)  # (n, 3)
        if not self.align:
            return centred, np.eye(3)
        if self.reference_ is None or len(self.reference_) != len(centred):
            self.reference_ = centred.copy()
        rotation = kabsch_rotation(centred, self.reference_)
        return centred @ rotation.T, rotation

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        boxed, aligned, rotation = self._boxed(self.atoms)  # copy, (n, 3), (3, 3)
        gradient = -np.array(self.calc.get_property("forces", boxed), dtype=float)  # (n, 3)
        if self.align:
            gradient = self._invariant_gradient(aligned, rotation, gradient)
        self.results = {
            "energy": float(self.calc.get_property("energy", boxed)),
            "forces": -(gradient - gradient.mean(axis=0)),
        }

    def _invariant_gradient(self, aligned, rotation, gradient):
        """``G`` (n, 3) of the class docstring: the grid's ``gradient`` (n, 3) at the
        ``aligned`` positions (n, 3), with the alignment's response, in the user's frame."""
        reference = self.reference_
        overlap = aligned.T @ reference  # (3, 3): S
        response = overlap - np.trace(overlap) * np.eye(3)  # (3, 3): M
        torque = np.cross(aligned, gradient).sum(axis=0)  # (3,)
        # least squares: about the axis of a linear molecule M is singular
        eta = np.linalg.lstsq(response.T, torque, rcond=None)[0]  # (3,)
        return (gradient + np.cross(eta, reference)) @ rotation


def checked_box(box):
    """``box`` as box lengths (3,) in Å; a one-line ValueError for any other shape or
    for lengths that are not positive and finite."""
    lengths = np.asarray(box, dtype=float)
    if lengths.shape != (3,) or not (np.isfinite(lengths).all() and (lengths > 0).all()):
        raise ValueError(f"box must be three positive lengths in Å, got {box!r}")
    return lengths


def band_box(configurations, vacuum=4.0):
    """The box lengths (3,) in Å that hold each of ``configurations`` (i, n, 3), centred
    on its mean position, with at least ``vacuum`` Å between every atom and the walls:
    one box for the images of a band (:class:`MoleculeBoxCalculator`'s ``box``)."""
    positions = np.asarray(configurations, dtype=float)  # (i, n, 3)
    centred = positions - positions.mean(axis=1, keepdims=True)  # (i, n, 3)
    return 2 * (np.abs(centred).max(axis=(0, 1)) + vacuum)  # (3,)


def kabsch_rotation(positions, reference):
    """The proper rotation ``R`` (3, 3) that minimises ``sum_i |R p_i - r_i|^2``.

    Parameters
    ----------
    positions, reference : ndarray of shape (n, 3)
        Centred positions ``p`` and ``r``.

    References
    ----------
    W. Kabsch, Acta Cryst. A 32, 922 (1976).
    """
    u, _, vt = np.linalg.svd(positions.T @ reference)
    handedness = np.sign(np.linalg.det(vt.T @ u.T))
    return vt.T @ np.diag([1.0, 1.0, handedness]) @ u.T
