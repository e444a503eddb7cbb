"""Data sets of labelled molecular configurations: generation, caching and loading.

A molecule is built from SMILES by RDKit, relaxed, its atoms displaced by seeded
Gaussian noise, and every configuration labelled with the energy and forces of an
ASE calculator. Energies are in eV, positions in Å, forces in eV/Å.
"""

import json
import os
import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.optimize import BFGS

from asebo.learn.prediction._checks import check_count
from asebo.smiles import molecule_from_smiles
from calculators import get_calculator

MOLECULES = {"water": "O", "glycerol": "OCC(O)CO", "nonanol": "CCCCCCCCCO"}
"""SMILES of the named molecules; any other SMILES string is accepted as well."""

DISPLACEMENTS = {"water": 0.12, "glycerol": 0.06, "nonanol": 0.05}
"""Default standard deviation (Å) of the noise added to each coordinate.

Wong and Kolter do not state it; these values give energy standard deviations (the
mean predictor's RMSE) of the order of the paper's 2.4 eV for water and 0.74 eV for
glycerol. The shipped 100-configuration sets have 3.27 eV (GPAW) and 3.88 eV
(GFN2-xTB) for water, 0.80 eV (GPAW LCAO) and 0.81 eV (GFN2-xTB) for glycerol.
"""

DEFAULT_DISPLACEMENT = 0.05
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
DEFAULT_FMAX = 0.02
"""Force threshold (eV/Å) of the relaxation of :func:`generate_dataset`."""

_SETTINGS = ("smiles", "calculator", "displacement", "random_state", "fmax", "prerelax")
"""Metadata that define a set: a stored set is used only where they all agree."""

_FILE_SAFE = frozenset(string.ascii_letters + string.digits + "=()[]@+-#.,")


def default_prerelax(calculator):
    """The pre-relaxation :func:`generate_dataset` uses by default: ``"gfn2"`` before GPAW.

    A GPAW relaxation from the force-field geometry takes many expensive steps; a
    GFN2-xTB relaxation first leaves it few. Other calculators relax alone.

    Parameters
    ----------
    calculator : str
        A preset of :func:`calculators.get_calculator`, with options after a colon.

    Returns
    -------
    str or None
    """
    name = str(calculator).partition(":")[0].strip().lower()
    return "gfn2" if name == "gpaw" else None


def _resolve_prerelax(calculator, prerelax):
    """``prerelax`` with ``"auto"`` replaced by :func:`default_prerelax`."""
    return default_prerelax(calculator) if prerelax == "auto" else prerelax


def relax_molecule(atoms, calculator, fmax=0.02, steps=200, prerelax=None):
    """Relax ``atoms`` with ``calculator`` by BFGS, optionally after a cheaper calculator.

    Parameters
    ----------
    atoms : ase.Atoms
    calculator : str or ase calculator
        A preset of :func:`calculators.get_calculator` (``'gpaw:mode=lcao'``) or a
        calculator.
    fmax : float
        Force threshold (eV/Å).
    prerelax : str, optional
        Spec of a cheap calculator (``"gfn2"``) that relaxes first, so the expensive
        one takes few steps.

    Returns
    -------
    ase.Atoms
        A relaxed copy without a calculator.
    """
    relaxed = atoms.copy()
    stages = ([prerelax] if prerelax else []) + [calculator]
    for stage in stages:
        relaxed.calc = get_calculator(stage) if isinstance(stage, str) else stage
        BFGS(relaxed, logfile=None).run(fmax=fmax, steps=steps)
    relaxed.calc = None
    return relaxed


def displaced_positions(equilibrium, count, displacement, random_state=0):
    """Configurations ``equilibrium + N(0, displacement^2)`` on every coordinate.

    The first ``k`` configurations do not depend on ``count``, so a larger set
    extends a smaller one with the same seed.

    Parameters
    ----------
    equilibrium : array (n, 3)
    count : int
    displacement : float
        Standard deviation in Å.
    random_state : int

    Returns
    -------
    array (count, n, 3)
    """
    equilibrium = np.asarray(equilibrium, dtype=np.float64)
    noise = np.random.default_rng(random_state).normal(size=(count, *equilibrium.shape))
    return equilibrium[None] + displacement * noise  # (count, n, 3)


@dataclass
class ConfigurationSet:
    """Configurations of one molecule with energies and forces.

    Unlabelled configurations (a set being computed) have NaN energies.

    Attributes
    ----------
    numbers : int array (n,)
    equilibrium : array (n, 3)
    positions : array (m, n, 3)
    energies : array (m,)
    forces : array (m, n, 3)
    metadata : dict
        ``molecule``, ``calculator``, ``displacement``, ``random_state`` and more.
    """

    numbers: np.ndarray
    equilibrium: np.ndarray
    positions: np.ndarray
    energies: np.ndarray
    forces: np.ndarray
    metadata: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.positions)

    @property
    def n_labelled(self):
        """Number of leading configurations with an energy."""
        missing = np.flatnonzero(~np.isfinite(self.energies))
        return int(missing[0]) if len(missing) else len(self)

    def subset(self, index):
        """The configurations ``index`` (an int array or a slice)."""
        return ConfigurationSet(
            self.numbers,
            self.equilibrium,
            self.positions[index],
            self.energies[index],
            self.forces[index],
            dict(self.metadata),
        )

    def save(self, path):
        """Write to ``path`` (``.npz``), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".part.npz")
        np.savez_compressed(
            temporary,
            numbers=self.numbers,
            equilibrium=self.equilibrium,
            positions=self.positions,
            energies=self.energies,
            forces=self.forces,
            metadata=np.array(json.dumps(self.metadata)),
        )
        os.replace(temporary, path)

    @classmethod
    def load(cls, path):
        """Read a set written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as data:
            return cls(
                data["numbers"],
                data["equilibrium"],
                data["positions"],
                data["energies"],
                data["forces"],
                json.loads(str(data["metadata"])),
            )


def _file_part(text, colon="%3A"):
    """``text`` with every character outside letters, digits and ``=()[]@+-#.,``
    percent-encoded (``/`` gives ``%2F``, ``_`` gives ``%5F``, ``%`` gives ``%25``),
    except ``:``, which becomes ``colon``; where that is ``-``, a ``-`` of ``text`` is
    encoded (``%2D``).

    Encoded parts hold no ``/`` (no subfolders) and no ``_`` (the separator of the
    file name's fields), and distinct texts give distinct parts.
    """
    safe = _FILE_SAFE - {colon}
    return "".join(
        character
        if character in safe
        else colon
        if character == ":"
        else "".join(f"%{byte:02X}" for byte in character.encode())
        for character in str(text)
    )


def dataset_filename(molecule, calculator, displacement=None, random_state=0, prerelax="auto"):
    """File name of a cached or shipped set, e.g. ``water_gpaw_d0.12_s0.npz``.

    The calculator spec's colon becomes a hyphen: ``gpaw:mode=lcao`` gives
    ``glycerol_gpaw-mode=lcao_d0.06_s0.npz``. Other characters that are unsafe in a
    file name, or that would make two sets share a name, are percent-encoded: the
    stereo SMILES ``C/C=C/C`` gives ``C%2FC=C%2FC_gfn2_d0.05_s0.npz``. A
    pre-relaxation other than :func:`default_prerelax` is added:
    ``water_gpaw_d0.12_s0_pre-none.npz``.
    """
    displacement = (
        DISPLACEMENTS.get(molecule, DEFAULT_DISPLACEMENT) if displacement is None else displacement
    )
    name = f"{_file_part(molecule)}_{_file_part(calculator, '-')}_d{displacement:g}_s{random_state}"
    prerelax = _resolve_prerelax(calculator, prerelax)
    if prerelax != default_prerelax(calculator):
        name += f"_pre-{_file_part(prerelax, '-') if prerelax else 'none'}"
    return f"{name}.npz"


def default_cache_dir():
    """``$ASEBO_CACHE`` or ``~/.cache/asebo``, with a ``prediction`` subfolder."""
    root = os.environ.get("ASEBO_CACHE", Path.home() / ".cache" / "asebo")
    return Path(root) / "prediction"


def _settings(molecule, calculator, displacement, random_state, fmax, prerelax):
    """The metadata of a set: what :func:`generate_dataset` records and compares."""
    return {
        "molecule": molecule,
        "smiles": MOLECULES.get(molecule, molecule),
        "calculator": calculator,
        "displacement": (
            DISPLACEMENTS.get(molecule, DEFAULT_DISPLACEMENT)
            if displacement is None
            else float(displacement)
        ),
        "random_state": int(random_state),
        "fmax": fmax,
        "prerelax": _resolve_prerelax(calculator, prerelax),
    }


def generate_dataset(
    molecule,
    calculator="gfn2",
    count=100,
    displacement=None,
    random_state=0,
    path=None,
    fmax=DEFAULT_FMAX,
    prerelax="auto",
    progress=False,
):
    """Relax a molecule, displace it and label the configurations (Wong and Kolter, Tables 1-2).

    Parameters
    ----------
    molecule : str
        A name of :data:`MOLECULES` or a SMILES string.
    calculator : str
        A preset of :func:`calculators.get_calculator`, with options after a colon:
        ``gfn2``, ``gpaw``, ``gpaw:mode=lcao``, ``emt``...
    count : int
        Number of configurations, 1 or more.
    displacement : float, optional
        Noise standard deviation (Å); default from :data:`DISPLACEMENTS`.
    random_state : int
        Seed of the embedding and of the noise.
    path : path, optional
        Where the set is written after every configuration. An existing file there
        made with the same settings (the metadata ``smiles``, ``calculator``,
        ``displacement``, ``random_state``, ``fmax`` and ``prerelax``) is resumed;
        one made with other settings is refused.
    fmax : float
        Force threshold of the relaxation (eV/Å).
    prerelax : str or None
        Cheap calculator spec that relaxes before ``calculator``; ``"auto"``:
        :func:`default_prerelax` (GFN2-xTB before GPAW, nothing before others);
        None: none. Recorded in the metadata.
    progress : bool
        Show a progress bar.

    Returns
    -------
    ConfigurationSet
    """
    count = check_count(count, "count")
    metadata = _settings(molecule, calculator, displacement, random_state, fmax, prerelax)
    data = _resumable(path, metadata)
    if data is None:
        start = molecule_from_smiles(metadata["smiles"], random_state)
        atoms = relax_molecule(start, calculator, fmax=fmax, prerelax=metadata["prerelax"])
        data = ConfigurationSet(
            atoms.numbers,
            atoms.positions,
            np.empty((0, len(atoms), 3)),
            np.empty(0),
            np.empty((0, len(atoms), 3)),
            metadata,
        )
    done = data.n_labelled
    positions = displaced_positions(
        data.equilibrium, max(count, done), metadata["displacement"], random_state
    )  # (count, n, 3)
    energies = np.full(len(positions), np.nan)
    forces = np.full(positions.shape, np.nan)
    energies[:done], forces[:done] = data.energies[:done], data.forces[:done]
    data = ConfigurationSet(data.numbers, data.equilibrium, positions, energies, forces, metadata)
    if done < count:
        atoms = Atoms(data.numbers, positions=data.equilibrium)
        atoms.calc = get_calculator(calculator)
        indices = range(done, count)
        if progress:
            from tqdm import tqdm

            indices = tqdm(indices, desc=f"{molecule} {calculator}")
        for i in indices:
            atoms.set_positions(positions[i])
            data.energies[i] = atoms.get_potential_energy()
            data.forces[i] = atoms.get_forces()
            if path is not None:
                data.save(path)
    return data.subset(slice(0, count))


def _recorded(data, path):
    """The metadata of the set ``data`` stored at ``path``, with ``prerelax``.

    Sets written before ``prerelax`` was recorded (the shipped ones) were made by
    ``examples/make_prediction_data.py`` in :data:`DATA_DIR`, with a GFN2-xTB
    pre-relaxation for every calculator but GFN2-xTB, and by :func:`load_dataset`
    elsewhere, without one.
    """
    metadata = dict(data.metadata)
    if "prerelax" not in metadata:
        shipped = Path(path).resolve().parent == DATA_DIR.resolve()
        calculator = str(metadata.get("calculator", ""))
        metadata["prerelax"] = None if not shipped or calculator.startswith("gfn2") else "gfn2"
    return metadata


def _check_settings(data, path, metadata):
    """``data`` (stored at ``path``) with its recorded metadata; ValueError where its
    settings are not those of ``metadata``."""
    recorded = _recorded(data, path)
    differ = [key for key in _SETTINGS if recorded.get(key) != metadata[key]]
    if differ:
        found = ", ".join(f"{key}={recorded.get(key)!r}" for key in differ)
        wanted = ", ".join(f"{key}={metadata[key]!r}" for key in differ)
        raise ValueError(
            f"{path} holds a set made with {found}, not {wanted}: move it away or "
            "choose another path or cache_dir"
        )
    data.metadata = recorded
    return data


def _resumable(path, metadata):
    if path is None or not Path(path).exists():
        return None
    return _check_settings(ConfigurationSet.load(path), path, metadata)


def load_dataset(
    molecule,
    calculator="gfn2",
    count=100,
    displacement=None,
    random_state=0,
    cache_dir=None,
    generate=True,
    fmax=DEFAULT_FMAX,
    prerelax="auto",
    progress=False,
):
    """A labelled set from the cache or the shipped files, computing what is missing.

    The cache (``cache_dir``, default :func:`default_cache_dir`) is looked at first,
    then ``asebo/data``; a set with at least ``count`` configurations is cut to
    ``count``. Otherwise the set is computed (resuming the larger of the two files)
    into the cache. A stored set under the name of :func:`dataset_filename` but made
    with other settings (see :func:`generate_dataset`) is refused.

    Parameters
    ----------
    molecule, calculator, count, displacement, random_state, fmax, prerelax, progress
        As in :func:`generate_dataset`; ``count`` is 1 or more.
    cache_dir : path, optional
    generate : bool
        Compute missing configurations; if False, raise instead.

    Returns
    -------
    ConfigurationSet
        Its metadata holds the settings, ``prerelax`` included.
    """
    count = check_count(count, "count")
    metadata = _settings(molecule, calculator, displacement, random_state, fmax, prerelax)
    name = dataset_filename(molecule, calculator, displacement, random_state, prerelax)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    found = [
        _check_settings(ConfigurationSet.load(p), p, metadata)
        for p in (cache / name, DATA_DIR / name)
        if p.exists()
    ]
    best = max(found, key=lambda d: d.n_labelled, default=None)
    if best is not None and best.n_labelled >= count:
        return best.subset(slice(0, count))
    if not generate:
        have = 0 if best is None else best.n_labelled
        raise ValueError(
            f"only {have} configurations of {name} are stored and {count} were "
            "asked for: allow generation or ask for fewer"
        )
    if best is not None:
        best.save(cache / name)
    return generate_dataset(
        molecule,
        calculator,
        count,
        displacement,
        random_state,
        path=cache / name,
        fmax=fmax,
        prerelax=prerelax,
        progress=progress,
    )
