"""Data sets of labelled molecular configurations: generation, caching and loading.

A molecule is built from SMILES by RDKit, relaxed, its atoms displaced by seeded
Gaussian noise, and every configuration labelled with the energy and forces of an
ASE calculator. Energies are in eV, positions in Å, forces in eV/Å.
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.optimize import BFGS

from asebo.smiles import molecule_from_smiles
from calculators import get_calculator

MOLECULES = {"water": "O", "glycerol": "OCC(O)CO", "nonanol": "CCCCCCCCCO"}
"""SMILES of the named molecules; any other SMILES string is accepted as well."""

DISPLACEMENTS = {"water": 0.12, "glycerol": 0.06, "nonanol": 0.05}
"""Default standard deviation (Å) of the noise added to each coordinate.

Wong and Kolter do not state it; these values give, with GFN2-xTB, energy standard
deviations (the mean predictor's RMSE) near the paper's: 2.4 eV for water and
0.74 eV for glycerol.
"""

DEFAULT_DISPLACEMENT = 0.05
DATA_DIR = Path(__file__).resolve().parents[2] / "data"


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


def dataset_filename(molecule, calculator, displacement=None, random_state=0):
    """File name of a cached or shipped set, e.g. ``water_gpaw_d0.12_s0.npz``.

    The calculator spec's colon becomes a hyphen: ``gpaw:mode=lcao`` gives
    ``glycerol_gpaw-mode=lcao_d0.06_s0.npz``.
    """
    displacement = (
        DISPLACEMENTS.get(molecule, DEFAULT_DISPLACEMENT) if displacement is None else displacement
    )
    tag = str(calculator).replace(":", "-")
    return f"{molecule}_{tag}_d{displacement:g}_s{random_state}.npz"


def default_cache_dir():
    """``$ASEBO_CACHE`` or ``~/.cache/asebo``, with a ``prediction`` subfolder."""
    root = os.environ.get("ASEBO_CACHE", Path.home() / ".cache" / "asebo")
    return Path(root) / "prediction"


def generate_dataset(
    molecule,
    calculator="gfn2",
    count=100,
    displacement=None,
    random_state=0,
    path=None,
    fmax=0.02,
    prerelax=None,
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
        Number of configurations.
    displacement : float, optional
        Noise standard deviation (Å); default from :data:`DISPLACEMENTS`.
    random_state : int
        Seed of the embedding and of the noise.
    path : path, optional
        Where the set is written after every configuration. An existing file there
        with the same molecule, calculator, displacement and seed is resumed.
    fmax : float
        Force threshold of the relaxation (eV/Å).
    prerelax : str, optional
        Cheap calculator spec that relaxes before ``calculator``.
    progress : bool
        Show a progress bar.

    Returns
    -------
    ConfigurationSet
    """
    if count < 1:
        raise ValueError(f"count must be positive, got {count}")
    displacement = (
        DISPLACEMENTS.get(molecule, DEFAULT_DISPLACEMENT)
        if displacement is None
        else float(displacement)
    )
    metadata = {
        "molecule": molecule,
        "smiles": MOLECULES.get(molecule, molecule),
        "calculator": calculator,
        "displacement": displacement,
        "random_state": int(random_state),
        "fmax": fmax,
    }
    data = _resumable(path, metadata)
    if data is None:
        start = molecule_from_smiles(MOLECULES.get(molecule, molecule), random_state)
        atoms = relax_molecule(start, calculator, fmax=fmax, prerelax=prerelax)
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
        data.equilibrium, max(count, done), displacement, random_state
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


def _resumable(path, metadata):
    if path is None or not Path(path).exists():
        return None
    data = ConfigurationSet.load(path)
    same = all(
        data.metadata.get(key) == metadata[key]
        for key in ("smiles", "calculator", "displacement", "random_state")
    )
    return data if same else None


def load_dataset(
    molecule,
    calculator="gfn2",
    count=100,
    displacement=None,
    random_state=0,
    cache_dir=None,
    generate=True,
    **generate_options,
):
    """A labelled set from the cache or the shipped files, computing what is missing.

    The cache (``cache_dir``, default :func:`default_cache_dir`) is looked at first,
    then ``asebo/data``; a set with at least ``count`` configurations is cut to
    ``count``. Otherwise the set is computed (resuming the larger of the two files)
    into the cache.

    Parameters
    ----------
    molecule, calculator, count, displacement, random_state
        As in :func:`generate_dataset`.
    cache_dir : path, optional
    generate : bool
        Compute missing configurations; if False, raise instead.
    **generate_options
        Passed to :func:`generate_dataset` (``prerelax``, ``fmax``, ``progress``).

    Returns
    -------
    ConfigurationSet
    """
    name = dataset_filename(molecule, calculator, displacement, random_state)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    found = [ConfigurationSet.load(p) for p in (cache / name, DATA_DIR / name) if p.exists()]
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
        **generate_options,
    )
