"""GPAW for molecules in a vacuum box and for periodic Atoms in their own cell."""

import numbers

from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes

from .box import MoleculeBoxCalculator, checked_box
from .cells import check_periodic_cell
from .kpoints import check_kpts, kpoint_grid, kpoint_size

MODES = ("fd", "lcao", "pw")
DEFAULT_MODE = {False: "fd", True: "lcao"}  # by whether any direction is periodic
DEFAULT_WIDTH = 0.1  # eV: Fermi-Dirac smearing of periodic cells


class CellAwareGPAW(Calculator):
    r"""GPAW that boxes molecules and runs periodic Atoms in their own cell.

    At each call the user's Atoms decide:

    - ``pbc`` all False (a molecule): GPAW runs inside a
      :class:`MoleculeBoxCalculator` (``vacuum`` Å around the atoms, ``align``),
      with ``symmetry='off'``; the default mode is ``'fd'``.
    - any direction periodic (bulk, a slab with ``pbc=(True, True, False)``, a
      wire): GPAW runs on the Atoms as they are, cell and vacuum included, after
      :func:`check_periodic_cell`. The default mode is ``'lcao'``. The k-point grid is
      ``kpts`` when given, otherwise :func:`kpoint_grid` of the first periodic call's
      cell at ``kdensity``, Γ-centred, one point along non-periodic axes; it is kept
      for later calls (a cell relaxation then keeps its k-points, so the energy stays
      a smooth function of the cell) until ``pbc`` changes. Occupations are
      Fermi-Dirac with ``width`` (default 0.1 eV), and only time-reversal symmetry
      is used (a relaxation breaks the point group).

    With smearing, the forces are the gradient of the Mermin free energy
    ``F = E - T S``, not of the energy extrapolated to zero width that ASE calls
    ``energy``. Both are returned, ``free_energy`` being ``F`` as ASE's convention has
    it; ASE's optimizers use ``free_energy`` where a calculator gives it.

    Parameters
    ----------
    mode : {'fd', 'lcao', 'pw'}, optional
        Real-space grid, atomic orbitals or plane waves. Default ``'fd'`` for
        molecules, ``'lcao'`` for periodic Atoms. Only ``'pw'`` gives the stress that
        a cell relaxation (``FrechetCellFilter``) needs.
    h : float
        Grid spacing in Å in the ``'fd'`` and ``'lcao'`` modes (in ``'pw'`` GPAW takes
        the density grid from ``ecut``).
    xc : str
        Exchange-correlation functional.
    basis : str
        LCAO basis; ``dzp`` ships with gpaw-data, ``'sz(dzp)'`` is its single-zeta part.
    ecut : float
        Plane-wave cutoff in eV in ``'pw'`` mode.
    kpts : int or sequence of 3 int, optional
        k-points along each periodic direction, or three numbers (1 along every
        non-periodic direction).
    kdensity : float
        k-points per Å⁻¹ of reciprocal length when ``kpts`` is not given.
    width : float, optional
        Fermi-Dirac width in eV; default 0.1 for periodic Atoms and GPAW's default
        (integer occupations) for molecules.
    vacuum : float
        Molecules only: vacuum in Å around the atoms in the box.
    align : bool
        Molecules only: rotate each configuration onto the first one
        (:class:`MoleculeBoxCalculator`).
    box : array (3,), optional
        Molecules only: Å, the first box (:class:`MoleculeBoxCalculator`); give a
        band's images one (:func:`calculators.box.band_box`).
    **kw
        Passed to ``gpaw.GPAW`` over the parameters above and ``txt=None``.

    Attributes
    ----------
    kpts_ : tuple of 3 int or None
        The k-point grid of the periodic calls.
    gpaw_ : gpaw.GPAW or None
        The GPAW calculator of the last call.

    Raises
    ------
    ValueError
        At construction for a mode, cutoff, width, density or ``kpts`` that cannot be;
        from ``calculate`` for a periodic cell that :func:`check_periodic_cell`
        refuses, ``kpts`` with points along a non-periodic axis, or ``align`` on
        periodic Atoms.

    References
    ----------
    J. J. Mortensen et al., "GPAW: An open Python package for electronic structure
    calculations", J. Chem. Phys. 160, 092503 (2024). N. D. Mermin, Phys. Rev. 137,
    A1441 (1965) (the free energy whose gradient the forces are).
    """

    implemented_properties = ("energy", "free_energy", "forces", "stress")
    name = "gpaw"

    def __init__(
        self,
        mode=None,
        h=0.2,
        xc="PBE",
        basis="dzp",
        ecut=400.0,
        kpts=None,
        kdensity=3.5,
        width=None,
        vacuum=4.0,
        align=False,
        box=None,
        **kw,
    ):
        super().__init__()
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        _check_number("h", h, "a grid spacing in Å")
        _check_number("ecut", ecut, "a plane-wave cutoff in eV")
        _check_number("kdensity", kdensity, "a k-point density in Å (points per Å⁻¹)")
        _check_number("vacuum", vacuum, "a length in Å")
        if width is not None:
            _check_number("width", width, "a Fermi-Dirac smearing in eV", minimum=0.0)
        self.options = {
            "mode": mode,
            "h": h,
            "xc": xc,
            "basis": basis,
            "ecut": float(ecut),
            "kpts": None if kpts is None else check_kpts(kpts),
            "kdensity": float(kdensity),
            "width": width,
            "vacuum": float(vacuum),
            "align": bool(align),
            "box": None if box is None else tuple(float(x) for x in checked_box(box)),
        }
        self.extra_parameters = kw
        self.kpts_ = None
        self.gpaw_ = None
        self._box = None
        self._pbc = None

    def todict(self):
        """The options and the extra GPAW parameters."""
        return {**self.options, **self.extra_parameters}

    def mode_for(self, pbc):
        """The mode of Atoms with periodicity ``pbc`` (3 bool)."""
        return self.options["mode"] or DEFAULT_MODE[bool(any(pbc))]

    def get_property(self, name, atoms=None, allow_calculation=True):
        if name == "stress":
            pbc = (atoms if atoms is not None else self.atoms).pbc
            if not pbc.any():
                raise PropertyNotImplementedError("a molecule in a vacuum box has no stress")
            if self.mode_for(pbc) != "pw":
                raise PropertyNotImplementedError(
                    "GPAW gives the stress only with plane waves: use mode='pw' "
                    "('gpaw:mode=pw') for a cell relaxation"
                )
        return super().get_property(name, atoms, allow_calculation)

    def gpaw_parameters_for(self, atoms):
        """The parameters ``gpaw.GPAW`` gets for ``atoms``.

        Parameters
        ----------
        atoms : ase.Atoms

        Returns
        -------
        dict
            For periodic Atoms with the k-point grid ``kpts_`` when one was chosen for
            the same ``pbc``, otherwise the grid this cell gives.
        """
        if not atoms.pbc.any():
            return {**self._molecule_parameters(), **self.extra_parameters}
        pbc = tuple(bool(p) for p in atoms.pbc)
        kpts = self.kpts_ if self._pbc == pbc else self._kpoints(atoms.cell, pbc)
        return {**self._periodic_parameters(kpts), **self.extra_parameters}

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if not self.atoms.pbc.any():
            self._calculate_molecule()
            return
        if self.options["align"]:
            raise ValueError("align=True is for molecules in a box; periodic atoms keep their cell")
        if self.options["box"] is not None:
            raise ValueError("box is for molecules in a box; periodic atoms keep their cell")
        check_periodic_cell(self.atoms)
        pbc = tuple(bool(p) for p in self.atoms.pbc)
        if self.gpaw_ is None or self._pbc != pbc:
            parameters = self.gpaw_parameters_for(self.atoms)
            self.gpaw_ = self._gpaw(parameters)
            self.kpts_, self._pbc = tuple(parameters["kpts"]["size"]), pbc
        self.results = {
            name: self.gpaw_.get_property(name, self.atoms)
            for name in ("energy", "free_energy", "forces")
        }
        if "stress" in properties:
            self.results["stress"] = self.gpaw_.get_property("stress", self.atoms)

    def _calculate_molecule(self):
        if self._box is None:
            self._box = MoleculeBoxCalculator(
                self._gpaw(self.gpaw_parameters_for(self.atoms)),
                vacuum=self.options["vacuum"],
                align=self.options["align"],
                box=self.options["box"],
            )
        self.gpaw_, self._pbc = self._box.calc, (False, False, False)
        energy = self._box.get_property("energy", self.atoms)
        self.results = {
            "energy": energy,
            "free_energy": energy,
            "forces": self._box.get_property("forces", self.atoms),
        }

    def _kpoints(self, cell, pbc):
        if self.options["kpts"] is not None:
            return kpoint_size(self.options["kpts"], pbc)
        return kpoint_grid(cell, pbc, self.options["kdensity"])

    def _mode_parameters(self, mode):
        if mode == "pw":
            return {"mode": {"name": "pw", "ecut": self.options["ecut"]}}
        parameters = {"mode": mode, "h": self.options["h"]}
        if mode == "lcao":
            parameters["basis"] = self.options["basis"]
        return parameters

    def _molecule_parameters(self):
        parameters = {
            **self._mode_parameters(self.mode_for((False, False, False))),
            "xc": self.options["xc"],
            "txt": None,
            "symmetry": "off",
        }
        if self.options["width"] is not None:
            parameters["occupations"] = {"name": "fermi-dirac", "width": self.options["width"]}
        return parameters

    def _periodic_parameters(self, kpts):
        width = DEFAULT_WIDTH if self.options["width"] is None else self.options["width"]
        return {
            **self._mode_parameters(self.mode_for((True, True, True))),
            "xc": self.options["xc"],
            "kpts": {"size": kpts, "gamma": True},
            "occupations": {"name": "fermi-dirac", "width": width},
            "symmetry": {"point_group": False, "time_reversal": True},
            "txt": None,
        }

    def _gpaw(self, parameters):
        from gpaw import GPAW

        return GPAW(**parameters)


def _check_number(name, value, what, minimum=None):
    """Raise a ValueError unless ``value`` is a real number above 0 (or >= ``minimum``)."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not number or not (value >= minimum if minimum is not None else value > 0):
        bound = f">= {minimum}" if minimum is not None else "> 0"
        raise ValueError(f"{name} must be {what}, {bound}, got {value!r}")
