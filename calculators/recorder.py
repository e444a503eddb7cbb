"""A calculator wrapper that counts, stores and replays calls in an ``ase.db`` database."""

import hashlib
import json
import os
import time

import ase.db
import numpy as np
from ase import Atoms
from ase.calculators.calculator import (
    CalculationFailed,
    Calculator,
    PropertyNotImplementedError,
    all_changes,
)
from ase.calculators.singlepoint import SinglePointCalculator
from ase.db.core import Database
from ase.io.jsonio import encode

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


STORED = ("energy", "free_energy", "forces", "stress", "dipole", "charges", "magmom", "magmoms")
"""The results a row keeps where the wrapped calculator gives them."""


def calculator_parameters(calc):
    """The parameters of ``calc`` (``todict()``) as JSON values, for the rows to record
    as ASE's trajectories do; empty for a calculator without ``todict()``."""
    try:
        return json.loads(encode(dict(calc.todict())))
    except Exception:  # a calculator without todict(), or values JSON cannot hold
        return {}


def _signature(numbers, pbc):
    """Hashable atomic numbers and periodicity (the database stores int32 numbers)."""
    return tuple(int(z) for z in numbers), tuple(bool(p) for p in pbc)


def _state(source):
    """What a stored answer must match beyond numbers and pbc: positions (n, 3), cell
    (3, 3), initial charges (n,) and magnetic moments (n,) or (n, 3), of an
    ``ase.Atoms`` or an ``ase.db`` row (zeros where a row has none, as an older row)."""
    if isinstance(source, Atoms):
        charges, magmoms = source.get_initial_charges(), source.get_initial_magnetic_moments()
    else:
        zeros = np.zeros(len(source.numbers))
        charges = source.get("initial_charges", zeros)
        magmoms = source.get("initial_magmoms", zeros)
    arrays = (source.positions, source.cell, charges, magmoms)
    return [np.asarray(array, dtype=float) for array in arrays]


def _connected(db):
    """The ``ase.db`` database of the file or URL ``db``, read once: ValueError in one
    line where it is no database (a file of something else, cut short), the file left
    as it is."""
    database = ase.db.connect(os.fspath(db))
    try:
        database.count()
    except Exception as error:  # sqlite3's, JSON's and ASE's errors alike
        what = "wait for the process that holds it" if "locked" in str(error) else "move it away"
        raise ValueError(
            f"{os.fspath(db)} cannot be read as an ase.db database ({type(error).__name__}: "
            f"{error}): give another db, or {what}"
        ) from error
    return database


class RecordingCalculator(Calculator):
    """Count the calls of a calculator, store each one, replay those already seen.

    Every call of the wrapped calculator is written to an ``ase.db`` database
    at once (one committed row per call: numbers, positions, cell, pbc, initial
    charges and magnetic moments, the results of :data:`STORED` it gives, the
    calculator's name and parameters as ASE's trajectories record them, and the
    key-value pairs ``calc_key``, ``calc_name``, ``wall_time`` in s), so a process
    killed mid-run loses nothing that was computed. A configuration already in the
    database for the same ``key`` (same numbers and pbc; positions, cell, initial
    charges and magnetic moments equal to ``POSITION_TOLERANCE`` = 1e-10) with the
    properties asked is answered from the stored row without calling the wrapped
    calculator; rows written by other processes on the same database are seen too.
    In a Bayesian optimisation the number of calls of the expensive calculator is
    the measure of cost (Wong & Kolter, Section "Bayesian optimization", Fig. 2).

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
        :func:`calculator_key` (name and parameters, as they are at each call). Give the same key to
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

    def __init__(self, calc, db="calls.db", key=None):
        super().__init__()
        self.calc = calc
        self.db = db if isinstance(db, Database) else _connected(db)
        self._key = None if key is None else str(key)
        self.ncalls = 0
        self.nhits = 0
        self._seen = {}  # (key, _signature) -> list of (row id, _state of the row)
        self._last_id = {}  # key -> the last row id indexed
        self._results_key = None  # the key of the results held

    @property
    def name(self):
        return f"recording-{self.calc.name}"

    @property
    def key(self):
        """The rows' ``calc_key``: the one given, else :func:`calculator_key` of the
        wrapped calculator as it is now (a ``calc.set(...)`` gives another)."""
        return calculator_key(self.calc) if self._key is None else self._key

    @property
    def implemented_properties(self):
        """Those of :data:`STORED` the wrapped calculator implements."""
        given = getattr(self.calc, "implemented_properties", ("energy", "forces"))
        return [name for name in STORED if name in given]

    def check_state(self, atoms, tol=1e-15):
        """ASE's changes of ``atoms`` since the results, and ``'calculator'`` where the
        wrapped calculator's :attr:`key` has changed since (its settings were set)."""
        changes = super().check_state(atoms, tol)
        if self.results and self.key != self._results_key:
            changes = [*changes, "calculator"]
        return changes

    def _refresh(self, key):
        """Index the rows of ``key`` written since the last refresh."""
        for row in self.db.select(f"id>{self._last_id.get(key, 0)}", calc_key=key):
            signature = _signature(row.numbers, row.pbc)
            self._seen.setdefault((key, signature), []).append((row.id, _state(row)))
            self._last_id[key] = max(self._last_id.get(key, 0), row.id)

    def lookup(self, atoms, properties=("energy", "forces")):
        """The stored row of a configuration with ``properties``, or None if it was never
        computed so: the same numbers, pbc, positions, cell, initial charges and
        magnetic moments (to ``POSITION_TOLERANCE``), and the same :attr:`key`.

        Parameters
        ----------
        atoms : ase.Atoms
        properties : sequence of str

        Returns
        -------
        ase.db.row.AtomsRow or None
        """
        key = self.key
        self._refresh(key)
        state = _state(atoms)
        for row_id, stored in self._seen.get((key, _signature(atoms.numbers, atoms.pbc)), ()):
            same = all(
                np.shape(a) == np.shape(b) and np.abs(a - b).max(initial=0.0) <= POSITION_TOLERANCE
                for a, b in zip(stored, state)
            )
            if same:
                row = self.db.get(id=row_id)
                if all(row.get(name) is not None for name in properties):
                    return row
        return None

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        wanted = ["energy", "forces", *(p for p in properties if p not in ("energy", "forces"))]
        key = self._results_key = self.key
        row = self.lookup(self.atoms, wanted)
        if row is not None:
            self.nhits += 1
            self.results = {
                name: np.copy(row.get(name)) if np.ndim(row.get(name)) else float(row.get(name))
                for name in STORED
                if row.get(name) is not None
            }
            return
        results, wall_time = self._call(self.atoms, wanted)
        record = Atoms(
            numbers=self.atoms.numbers,
            positions=self.atoms.positions,
            cell=self.atoms.cell,
            pbc=self.atoms.pbc,
            charges=self.atoms.get_initial_charges(),
            magmoms=self.atoms.get_initial_magnetic_moments(),
        )
        record.calc = SinglePointCalculator(record, **results)
        record.calc.name = self.calc.name  # the row names the calculator, as a trajectory
        record.calc.parameters.update(calculator_parameters(self.calc))
        self.db.write(record, calc_key=key, calc_name=self.calc.name, wall_time=wall_time)
        self.results = results

    def _call(self, atoms, properties):
        """The ``properties`` of one call of the wrapped calculator (and the others of
        :data:`STORED` it gave with them), and its wall time."""
        self.ncalls += 1
        copy = atoms.copy()
        start = time.perf_counter()
        try:
            results = {name: self.calc.get_property(name, copy) for name in properties}
        except PropertyNotImplementedError:
            raise
        except Exception as exc:
            raise CalculationFailed(
                f"{self.calc.name} failed on {atoms.get_chemical_formula()} "
                f"({type(exc).__name__}: {exc}); nothing was stored for this call"
            ) from exc
        wall_time = time.perf_counter() - start
        given = getattr(self.calc, "results", {})
        results.update(
            {name: given[name] for name in STORED if name in given and name not in results}
        )
        results = {
            name: np.array(value, dtype=float) if np.ndim(value) else float(value)
            for name, value in results.items()
        }
        if not (np.isfinite(results["energy"]) and np.isfinite(results["forces"]).all()):
            raise ValueError(
                f"{self.calc.name} returned a non-finite energy or forces for "
                f"{atoms.get_chemical_formula()}; nothing was stored. Check the "
                "geometry (overlapping or far-flung atoms) and the calculator settings."
            )
        return results, wall_time
