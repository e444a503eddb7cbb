"""The QM9 data set, read from the CSV files shipped inside the ``qm9pack`` package.

QM9 (Ramakrishnan et al., Sci. Data 1, 140022 (2014)) holds 134k small organic
molecules (up to nine heavy atoms C, N, O, F) with B3LYP/6-31G(2df,p) geometries and
properties. ``qm9pack`` ships 130,831 of them as three CSV files; nothing is
downloaded. The files are found with :mod:`importlib.resources` from the package's
import spec, without running ``qm9pack/__init__.py`` (which imports ``pkg_resources``,
gone from recent setuptools).

Typical use::

    from asebo.learn.qm9 import load_qm9, HARTREE_TO_KCAL_PER_MOL

    data = load_qm9()                          # parsed once, then cached
    subset = data.sample(1000, random_state=0)
    y = subset.atomization_energy * HARTREE_TO_KCAL_PER_MOL   # (1000,)
    atoms = subset.to_atoms(0)                 # an ase.Atoms

Units are those of the files: Hartree for energies, Angstrom for coordinates,
cm^-1 for harmonic frequencies.

References
----------
.. [1] R. Ramakrishnan, P. O. Dral, M. Rupp, O. A. von Lilienfeld, "Quantum chemistry
   structures and properties of 134 kilo molecules", Sci. Data 1, 140022 (2014).
.. [2] R. Fabregat, P. van Gerwen, M. Haeberle, F. Eisenbrand, C. Corminboeuf,
   "Metric learning for kernel ridge regression: assessment of molecular similarity",
   Mach. Learn.: Sci. Technol. 3, 035015 (2022), section "Dataset".
"""

import csv
import functools
import importlib.resources
import importlib.util
from dataclasses import dataclass, field

import numpy as np
from ase import Atoms
from ase.data import atomic_numbers
from ase.units import Hartree, kcal, mol

__all__ = [
    "ATOMIC_REFERENCE_U0",
    "HARTREE_TO_EV",
    "HARTREE_TO_KCAL_PER_MOL",
    "QM9",
    "load_qm9",
]

#: Energy of the isolated atoms at 0 K (U0, Hartree) at the QM9 level of theory,
#: B3LYP/6-31G(2df,p), from the ``atomref`` table of ref. [1]; keys are atomic numbers.
ATOMIC_REFERENCE_U0 = {
    1: -0.500273,
    6: -37.846772,
    7: -54.583861,
    8: -75.064579,
    9: -99.718730,
}

HARTREE_TO_EV = float(Hartree)
HARTREE_TO_KCAL_PER_MOL = float(Hartree / (kcal / mol))

_CSV_FILES = ("qm9_part1.csv", "qm9_part2.csv", "qm9_part3.csv")
_COLUMNS = {
    "index": "Index",
    "smiles": "SMILES",
    "elements": "Elements",
    "positions": "XYZ_Ang",
    "frequencies": "Harmonic_Freq_cmi",
    "gap": "HOMO_LUMO_gap_au",
    "u0": "InternalEnergy_0K_au",
}


@dataclass(frozen=True, eq=False)
class QM9:
    """A set of QM9 molecules: geometries, SMILES and properties, as read-only arrays.

    Get the full set from :func:`load_qm9` and smaller ones with :meth:`subset` or
    :meth:`sample`. Ragged per-molecule data (atomic numbers, positions, frequencies)
    are tuples with one array per molecule, parsed from the text of the files the first
    time they are asked for, so that a sample of a few thousand molecules costs
    milliseconds.

    Attributes
    ----------
    ids : ndarray of shape (n,), int
        QM9 index of each molecule (``dsgdb9nsd_000001`` is 1).
    smiles : tuple of str, length n
        SMILES string of each molecule, as in the files.
    u0 : ndarray of shape (n,), float64
        Internal energy at 0 K in Hartree.
    homo_lumo_gap : ndarray of shape (n,), float64
        HOMO-LUMO gap in Hartree (NaN where the files give none).
    numbers : tuple of n ndarrays of shape (n_atoms_i,), int
        Atomic numbers.
    positions : tuple of n ndarrays of shape (n_atoms_i, 3), float64
        Cartesian coordinates in Angstrom.
    frequencies : tuple of n ndarrays of shape (n_modes_i,), float64
        Harmonic vibrational frequencies in cm^-1; ``n_modes_i`` is ``3 n_atoms - 6``,
        or ``3 n_atoms - 5`` for linear molecules.
    elements_text, positions_text, frequencies_text : tuple of str, length n
        The text of the files from which the three ragged attributes above are parsed.
    """

    ids: np.ndarray
    smiles: tuple
    u0: np.ndarray
    homo_lumo_gap: np.ndarray
    elements_text: tuple = field(repr=False)
    positions_text: tuple = field(repr=False)
    frequencies_text: tuple = field(repr=False)

    def __len__(self):
        return len(self.ids)

    @functools.cached_property
    def numbers(self):
        """Atomic numbers, one read-only ``(n_atoms_i,)`` array per molecule."""
        return tuple(
            _read_only(
                np.array(
                    [atomic_numbers[s] for s in text.strip("[]").replace("'", "").split(",")],
                    dtype=np.int64,
                )
            )
            for text in self.elements_text
        )

    @functools.cached_property
    def positions(self):
        """Coordinates in Angstrom, one read-only ``(n_atoms_i, 3)`` array per molecule."""
        return tuple(
            _read_only(xyz.reshape(-1, 3)) for xyz in _parse_number_lists(self.positions_text)
        )

    @functools.cached_property
    def frequencies(self):
        """Harmonic frequencies in cm^-1, one read-only array per molecule."""
        return tuple(
            _read_only(_unique_modes(freq, len(z)))
            for freq, z in zip(_parse_number_lists(self.frequencies_text), self.numbers)
        )

    @property
    def n_atoms(self):
        """Number of atoms of each molecule, shape ``(n,)``."""
        return np.array([len(z) for z in self.numbers], dtype=np.int64)

    @property
    def atomization_energy(self):
        """U0 minus the U0 of the free atoms (:data:`ATOMIC_REFERENCE_U0`), in Hartree.

        Negative for bound molecules; shape ``(n,)``. Multiply by
        :data:`HARTREE_TO_KCAL_PER_MOL` for kcal/mol, the unit of Fabregat et al. (2022).
        """
        atoms_energy = np.array(
            [sum(ATOMIC_REFERENCE_U0[int(z)] for z in numbers) for numbers in self.numbers]
        )  # (n,)
        return self.u0 - atoms_energy

    def to_atoms(self, i):
        """Molecule ``i`` as an :class:`ase.Atoms` (no cell, no periodicity)."""
        return Atoms(numbers=self.numbers[i], positions=self.positions[i])

    def subset(self, indices):
        """The molecules at the given positions (not QM9 ids), in that order.

        Parameters
        ----------
        indices : array-like of int
            Positions in ``0 .. len(self) - 1``.

        Returns
        -------
        QM9
        """
        indices = np.asarray(indices)
        if indices.ndim != 1 or not (indices.size == 0 or np.issubdtype(indices.dtype, np.integer)):
            raise ValueError("indices must be a 1-D array of integer positions")
        if indices.size and (indices.min() < 0 or indices.max() >= len(self)):
            raise ValueError(f"indices must lie in [0, {len(self)}), the size of this set")
        indices = indices.astype(np.int64)
        pick = indices.tolist()
        return QM9(
            ids=_read_only(self.ids[indices]),
            smiles=tuple(self.smiles[i] for i in pick),
            u0=_read_only(self.u0[indices]),
            homo_lumo_gap=_read_only(self.homo_lumo_gap[indices]),
            elements_text=tuple(self.elements_text[i] for i in pick),
            positions_text=tuple(self.positions_text[i] for i in pick),
            frequencies_text=tuple(self.frequencies_text[i] for i in pick),
        )

    def sample(self, n, random_state=None):
        """``n`` molecules drawn without replacement, reproducibly for a given seed.

        Parameters
        ----------
        n : int
            How many molecules, at most ``len(self)``.
        random_state : int, numpy Generator or None
            Seed of :func:`numpy.random.default_rng`.

        Returns
        -------
        QM9
        """
        if not 0 <= n <= len(self):
            raise ValueError(f"cannot sample {n} molecules from a set of {len(self)}")
        rng = np.random.default_rng(random_state)
        return self.subset(rng.choice(len(self), size=n, replace=False))


@functools.cache
def load_qm9():
    """All QM9 molecules shipped with ``qm9pack``, read on the first call and cached.

    The first call reads about 230 MB of CSV (several seconds); later calls return the
    same object. Its arrays are read-only, so the cache cannot be altered by accident.

    Returns
    -------
    QM9
        130,831 molecules sorted by QM9 index.
    """
    columns = _read_columns()
    return QM9(
        ids=_read_only(np.array(columns["index"], dtype=np.int64)),
        smiles=tuple(columns["smiles"]),
        u0=_read_only(np.array(columns["u0"], dtype=np.float64)),
        homo_lumo_gap=_read_only(np.array([g or "nan" for g in columns["gap"]], dtype=np.float64)),
        elements_text=tuple(columns["elements"]),
        positions_text=tuple(columns["positions"]),
        frequencies_text=tuple(columns["frequencies"]),
    )


def _data_folder():
    spec = importlib.util.find_spec("qm9pack")
    if spec is None:
        raise ModuleNotFoundError("QM9 needs the 'qm9pack' package: pip install 'asebo[learn]'")
    package = importlib.util.module_from_spec(spec)  # not executed: only its location
    return importlib.resources.files(package) / "data"


def _read_columns():
    """The columns of :data:`_COLUMNS` as lists of strings, rows sorted by QM9 index."""
    folder = _data_folder()
    rows = []
    for name in _CSV_FILES:
        with (folder / name).open(newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader)
            where = [header.index(column) for column in _COLUMNS.values()]
            rows.extend([record[k] for k in where] for record in reader)
    rows.sort(key=lambda row: int(row[0]))
    return dict(zip(_COLUMNS, map(list, zip(*rows))))


def _parse_number_lists(texts):
    """Parse nested lists of numbers written as text into one flat float64 array each."""
    cleaned = [t.replace("[", "").replace("]", "") for t in texts]
    if not cleaned:
        return []
    counts = np.array([c.count(",") + 1 for c in cleaned])
    flat = np.fromstring(",".join(cleaned), dtype=np.float64, sep=",")
    if len(flat) != counts.sum():
        raise ValueError("malformed number list in the QM9 files")
    return np.split(flat, np.cumsum(counts)[:-1])


def _unique_modes(frequencies, n_atoms):
    """The ``3N-6`` (or ``3N-5`` if linear) frequencies; some rows list them twice."""
    n_modes = 3 * n_atoms - 5 if len(frequencies) == 3 * n_atoms - 5 else 3 * n_atoms - 6
    if len(frequencies) % n_modes:
        raise ValueError(f"{len(frequencies)} frequencies for a molecule of {n_atoms} atoms")
    return frequencies[:n_modes].copy()


def _read_only(array):
    array.setflags(write=False)
    return array
