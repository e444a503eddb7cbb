"""The runs of a campaign in an ``ase.db`` database, one row a run.

Each row holds the final geometry as its atoms, the final energy and forces as its
calculator results, the key-value pairs ``molecule``, ``optimizer``, ``start``,
``calls``, ``converged``, ``failed`` (and ``error``), ``final_fmax``, ``steps``,
``seconds``, ``seconds_outside``, the campaign settings (``calc``, ``target_fmax``,
``max_steps``, ``noise``, ``seed``), ``campaign`` (their key) and ``reference`` (the
fingerprint of the molecule's reference geometry); its ``data`` hold ``energies``
(the energy after every force call) and ``start_positions``.

A run is claimed before it is computed: :meth:`CampaignStore.claim` reserves its row
(``molecule``, ``optimizer``, ``start``, ``campaign``) under the database's lock file,
with ``owner`` (host and process id), ``claimed`` (time), ``reference`` and the
campaign settings, and the finished run fills that row (a row without ``calls`` is a
run being computed). Two processes started on one database therefore never compute the
same run: the second skips the runs the first claimed and waits for them.
"""

import os
import socket
import time
from dataclasses import dataclass, field

import ase.db
import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator


class CampaignMismatchError(ValueError):
    """A database that holds runs of another campaign or of other geometries."""


@dataclass
class RunRecord:
    """A stored run, as the summary and the plots read it.

    Attributes
    ----------
    molecule, optimizer : str
    start : int
    calls : int
        Force calls of the run (calls before the failure for a failed run).
    converged : bool
    energy : float
        Final energy in eV; NaN for a failed run.
    energies : ndarray, shape (calls,)
        Energy after every force call, eV.
    error : str
        Why the run failed; empty when it did not.
    seconds, seconds_outside : float
        Wall time of the run and the part of it outside the calculator.
    """

    molecule: str
    optimizer: str
    start: int
    calls: int
    converged: bool
    energy: float
    energies: np.ndarray = field(repr=False)
    error: str = ""
    seconds: float = 0.0
    seconds_outside: float = 0.0

    @property
    def failed(self):
        return bool(self.error)


def owner():
    """``host:pid`` of this process, the owner of the runs it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _is_dead(owner):
    """Whether ``owner`` (``host:pid``) is a process of this host that has ended."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


FLAGS = {
    "calc": "--calc",
    "target_fmax": "--fmax",
    "max_steps": "--steps",
    "noise": "--noise",
    "seed": "--seed",
}


def _describe(settings):
    return " ".join(f"{FLAGS[name]} {value}" for name, value in settings.items())


class CampaignStore:
    """The database of one campaign: what is stored, what to skip, what to write.

    Parameters
    ----------
    db : str or os.PathLike
        Anything :func:`ase.db.connect` opens: an SQLite file (``runs.db``), a JSON
        file, a PostgreSQL URL.
    """

    def __init__(self, db):
        self.name = os.fspath(db)
        self.db = ase.db.connect(self.name)
        lock = getattr(self.db, "lock", None)
        if lock is not None:
            with lock:
                # the first access creates the tables: two campaigns started together
                # on a new file would both create them, and one would fail
                self.db.count()

    def _rows(self, **selection):
        return self.db.select(include_data=False, **selection)

    def __len__(self):
        return self.db.count()

    def check(self, campaign, references):
        """Refuse a database of another campaign before anything is written to it.

        Parameters
        ----------
        campaign : asebo.campaign.Campaign
        references : dict of str to str
            Molecule label to :func:`asebo.campaign.plan.geometry_fingerprint` of its
            reference geometry.

        Raises
        ------
        CampaignMismatchError
            When a row is not a comparison run, belongs to a campaign with other
            settings, or relaxed a molecule of the same label from another reference
            geometry. The message names the differences; the database is untouched.
        """
        settings = campaign.settings()
        for row in self._rows():
            pairs = row.key_value_pairs
            if "campaign" not in pairs:
                raise CampaignMismatchError(
                    f"{self.name} holds rows that are not comparison runs (row {row.id} has "
                    "no campaign key): give --db a new file name"
                )
            if pairs["campaign"] != campaign.key:
                stored = {name: pairs.get(name) for name in settings}
                differ = {name: value for name, value in settings.items() if stored[name] != value}
                raise CampaignMismatchError(
                    f"{self.name} holds runs of another campaign ({_describe(stored)}); "
                    f"this one has {_describe(differ)}. Give --db another file for the new "
                    "campaign, or the stored settings to continue the old one. Nothing was "
                    f"written to {self.name}"
                )
            expected = references.get(pairs["molecule"])
            if expected is not None and pairs.get("reference", expected) != expected:
                raise CampaignMismatchError(
                    f"{self.name} holds runs of molecule {pairs['molecule']!r} from another "
                    "reference geometry (the file changed, or RDKit built the SMILES "
                    "differently): give --db another file or rename the molecule file. "
                    f"Nothing was written to {self.name}"
                )

    def stored(self):
        """``{(molecule, optimizer, start)}`` of every finished run, failed ones included."""
        return {
            (row.molecule, row.optimizer, row.start)
            for row in self._rows()
            if "calls" in row.key_value_pairs
        }

    def claim(self, run, campaign):
        """Reserve the row of ``run`` for this process; the row id, or None if taken.

        Atomic: :meth:`ase.db.core.Database.reserve` checks and writes under the
        database's lock file.
        """
        row = self.db.reserve(
            molecule=run.molecule,
            optimizer=run.optimizer,
            start=int(run.start),
            campaign=campaign.key,
        )
        if row is not None:
            self.db.update(
                row,
                reference=run.reference,
                owner=owner(),
                claimed=time.time(),
                **campaign.settings(),
            )
        return row

    def unfinished(self):
        """``{(molecule, optimizer, start): owner}`` of the runs claimed and not finished."""
        return {
            (row.molecule, row.optimizer, row.start): row.get("owner", "")
            for row in self._rows()
            if "calls" not in row.key_value_pairs
        }

    def release(self, names=None, only_dead=False):
        """Delete the claims of unfinished runs; returns the names of those deleted.

        Parameters
        ----------
        names : set of (str, str, int), optional
            Only the claims of these runs; default only those of this process.
        only_dead : bool
            Only the claims of processes of this host that have ended (a campaign
            killed mid-run).
        """
        ids, released = [], []
        for row in self._rows():
            name = (row.molecule, row.optimizer, row.start)
            if "calls" in row.key_value_pairs or (names is not None and name not in names):
                continue
            holder = row.get("owner", "")
            if _is_dead(holder) if only_dead else (names is not None or holder == owner()):
                ids.append(row.id)
                released.append(name)
        if ids:
            self.db.delete(ids)
        return released

    def delete_failed(self):
        """Delete the rows of failed runs so they run again; returns how many."""
        ids = [row.id for row in self._rows(failed=True)]
        if ids:
            self.db.delete(ids)
        return len(ids)

    def write(self, run, campaign, result):
        """Store one finished run at once (committed before the next one is written).

        Parameters
        ----------
        run : asebo.campaign.Run
        campaign : asebo.campaign.Campaign
        result : dict
            What :func:`asebo.campaign.execute.run_one` returns.

        Returns
        -------
        int
            The row id.
        """
        failed = bool(result.get("error"))
        positions = run.atoms.positions if failed else result["positions"]  # (n, 3)
        atoms = Atoms(
            numbers=run.atoms.numbers,
            positions=positions,
            cell=run.atoms.cell,
            pbc=run.atoms.pbc,
            charges=run.atoms.get_initial_charges(),
        )
        if not failed:
            atoms.calc = SinglePointCalculator(
                atoms, energy=result["energy"], forces=result["forces"]
            )
            atoms.calc.name = campaign.settings()["calc"]
        pairs = {
            "molecule": run.molecule,
            "optimizer": run.optimizer,
            "start": int(run.start),
            "calls": int(result["calls"]),
            "converged": bool(result.get("converged", False)),
            "failed": failed,
            "campaign": campaign.key,
            "reference": run.reference,
            "seconds": float(result.get("seconds", 0.0)),
            "seconds_outside": float(result.get("seconds_outside", 0.0)),
            **campaign.settings(),
        }
        if failed:
            pairs["error"] = str(result["error"])
        else:
            pairs["final_fmax"] = float(result["fmax"])
            pairs["steps"] = int(result["steps"])
        data = {
            "energies": np.asarray(result["energies"], dtype=np.float64),  # (calls,)
            "start_positions": np.asarray(run.atoms.positions, dtype=np.float64),
        }
        claimed = [
            row.id
            for row in self._rows(
                molecule=run.molecule,
                optimizer=run.optimizer,
                start=int(run.start),
                campaign=campaign.key,
            )
            if "calls" not in row.key_value_pairs
        ]
        if claimed:
            self.db.update(claimed[0], atoms=atoms, data=data, delete_keys=["owner"], **pairs)
            return claimed[0]
        return self.db.write(atoms, key_value_pairs=pairs, data=data)

    def records(self, names=None):
        """The stored runs, as :class:`RunRecord`, in the order they were written.

        Parameters
        ----------
        names : set of (str, str, int), optional
            Only these ``(molecule, optimizer, start)``; default all.

        Returns
        -------
        list of RunRecord
        """
        records = []
        for row in self.db.select():
            if "calls" not in row.key_value_pairs:
                continue  # claimed, not finished
            if names is not None and (row.molecule, row.optimizer, row.start) not in names:
                continue
            failed = bool(row.get("failed", False))
            records.append(
                RunRecord(
                    molecule=row.molecule,
                    optimizer=row.optimizer,
                    start=int(row.start),
                    calls=int(row.calls),
                    converged=bool(row.converged),
                    energy=np.nan if failed else float(row.energy),
                    energies=np.asarray(row.data.get("energies", []), dtype=np.float64),
                    error=row.get("error", "") if failed else "",
                    seconds=float(row.get("seconds", 0.0)),
                    seconds_outside=float(row.get("seconds_outside", 0.0)),
                )
            )
        return records
