"""A calculator wrapper that counts, stores and replays calls in an ``ase.db`` database."""

import hashlib
import json
import os
import time

import ase.db
import numpy as np
from ase import Atoms
from ase.calculators.calculator import CalculationFailed, Calculator, all_changes
from ase.calculators.singlepoint import SinglePointCalculator
from ase.db.core import Database

POSITION_TOLERANCE = 1e-10  # Å: configurations closer than this are the same


def calculator_key(calc):
    """A string naming a calculator and its parameters.

    Rows stored with one key are only replayed for a calculator with the same
    key, so a GFN2 result is never answered to a GPAW call.

    Parameters
    ----------
    calc : ASE calculator

    Returns
    -------
    str
        ``"<name>:<16 hex digits of a SHA-256 of the parameters>"``.
    """
    parameters = calc.todict() if hasattr(calc, "todict") else {}
    text = json.dumps(parameters, sort_keys=True, default=repr)
    return f"{calc.name}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _signature(numbers, pbc):
    """Hashable atomic numbers and periodicity (the database stores int32 numbers)."""
    return tuple(int(z) for z in numbers), tuple(bool(p) for p in pbc)


class RecordingCalculator(Calculator):
    """Count the calls of a calculator, store each one, replay those already seen.

    Every call of the wrapped calculator is written to an ``ase.db`` database
    at once (one committed row per call: numbers, positions, cell, pbc, energy,
    forces, and the key-value pairs ``calc_key``, ``calc_name``,
    ``wall_time`` in s), so a process killed mid-run loses nothing that was
    computed. A configuration already in the database for the same
    ``key`` (same numbers and pbc, positions and cell equal to
    ``POSITION_TOLERANCE`` = 1e-10 Å) is answered from the stored row without
    calling the wrapped calculator; rows written by other processes on the
    same database are seen too. In a Bayesian optimisation the number of calls
    of the expensive calculator is the measure of cost (Wong & Kolter, Section
    "Bayesian optimization", Fig. 2).

    Parameters
    ----------
    calc : ASE calculator
        The wrapped calculator; it must give ``energy`` and ``forces``.
    db : str, os.PathLike or ase.db.core.Database
        An SQLite file (``calls.db``), a PostgreSQL URL
        (``postgresql://user:password@host:5432/name``, needs psycopg2) or an
        open ``ase.db`` database.
    key : str, optional
        Name of the calculator in the database; default
        :func:`calculator_key` (name and parameters). Give the same key to
        share rows between calculators that differ only in settings that do
        not change results (e.g. verbosity).

    Attributes
    ----------
    ncalls : int
        Calls of the wrapped calculator by this instance, failed ones included.
    nhits : int
        Configurations answered from the database.

    Raises
    ------
    ase.calculators.calculator.CalculationFailed
        From ``calculate`` when the wrapped calculator raises (e.g. SCF not
        converged); nothing is stored for that call.
    ValueError
        From ``calculate`` when the energy or forces are not finite; nothing
        is stored for that call.

    References
    ----------
    E. Wong, J. Z. Kolter, "An SVD and derivative kernel approach to learning
    from geometric data", Section "Bayesian optimization".
    A. H. Larsen et al., J. Phys.: Condens. Matter 29, 273002 (2017) (ASE and
    ``ase.db``).
    """

    implemented_properties = ("energy", "forces")

    def __init__(self, calc, db="calls.db", key=None):
        super().__init__()
        self.calc = calc
        self.db = db if isinstance(db, Database) else ase.db.connect(os.fspath(db))
        self.key = calculator_key(calc) if key is None else str(key)
        self.ncalls = 0
        self.nhits = 0
        self._seen = {}  # _signature -> list of (row id, positions (n, 3), cell (3, 3))
        self._last_id = 0

    @property
    def name(self):
        return f"recording-{self.calc.name}"

    def _refresh(self):
        """Index the rows of this key written since the last refresh."""
        for row in self.db.select(f"id>{self._last_id}", calc_key=self.key):
            signature = _signature(row.numbers, row.pbc)
            self._seen.setdefault(signature, []).append(
                (row.id, row.positions, np.asarray(row.cell, dtype=float))
            )
            self._last_id = max(self._last_id, row.id)

    def lookup(self, atoms):
        """The stored row of a configuration, or None if it was never computed.

        Parameters
        ----------
        atoms : ase.Atoms

        Returns
        -------
        ase.db.row.AtomsRow or None
        """
        self._refresh()
        signature = _signature(atoms.numbers, atoms.pbc)
        cell = np.asarray(atoms.cell, dtype=float)  # (3, 3)
        for row_id, positions, row_cell in self._seen.get(signature, ()):
            if (
                np.abs(positions - atoms.positions).max(initial=0.0) <= POSITION_TOLERANCE
                and np.abs(row_cell - cell).max() <= POSITION_TOLERANCE
            ):
                return self.db.get(id=row_id)
        return None

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        row = self.lookup(self.atoms)
        if row is not None:
            self.nhits += 1
            self.results = {"energy": float(row.energy), "forces": row.forces.copy()}
            return
        energy, forces, wall_time = self._call(self.atoms)
        record = Atoms(
            numbers=self.atoms.numbers,
            positions=self.atoms.positions,
            cell=self.atoms.cell,
            pbc=self.atoms.pbc,
        )
        record.calc = SinglePointCalculator(record, energy=energy, forces=forces)
        self.db.write(record, calc_key=self.key, calc_name=self.calc.name, wall_time=wall_time)
        self.results = {"energy": energy, "forces": forces}

    def _call(self, atoms):
        """Energy, forces and wall time of one call of the wrapped calculator."""
        self.ncalls += 1
        copy = atoms.copy()
        start = time.perf_counter()
        try:
            energy = float(self.calc.get_property("energy", copy))
            forces = np.array(self.calc.get_property("forces", copy), dtype=float)
        except Exception as exc:
            raise CalculationFailed(
                f"{self.calc.name} failed on {atoms.get_chemical_formula()} "
                f"({type(exc).__name__}: {exc}); nothing was stored for this call"
            ) from exc
        wall_time = time.perf_counter() - start
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            raise ValueError(
                f"{self.calc.name} returned a non-finite energy or forces for "
                f"{atoms.get_chemical_formula()}; nothing was stored. Check the "
                "geometry (overlapping or far-flung atoms) and the calculator settings."
            )
        return energy, forces, wall_time
