r"""Energy prediction from molecular configurations with the SVD kernel (seed 003).

Three parts, as in the paper's section "Application to Molecular Energy Prediction":

* **Data.** :func:`generate_dataset` relaxes a molecule (built from SMILES by RDKit),
  displaces its atoms by seeded Gaussian noise and labels every configuration with
  the energy and forces of an ASE calculator; :func:`load_dataset` returns a cached or
  shipped set (``asebo/data``) and only computes what is missing.
* **Models.** The mean predictor; kernel ridge regression (KRR) on the sorted
  eigenvalues of the Coulomb matrix with a Gaussian kernel (Rupp et al. 2012); KRR
  with the SVD kernel on energies; and the SVD kernel with derivatives, trained on
  energies and forces and predicting the energy by seed 003 eq. 34 with the joint
  covariance of eqs. 11-14 and regularisation ``lambda`` on energies and
  ``lambda_deriv`` on gradients.
* **Model selection and assessment.** Hyperparameters (``gamma``, ``lambda``,
  ``lambda_deriv``) from a grid by inner k-fold cross-validation on RMSE, as in the
  paper, or by the marginal likelihood on the same grid (seed 004, eq. 27, with the
  signal variance profiled out); RMSE by outer cross-validation and learning curves
  (seed 003, Tables 1-2, Fig. 1). All ``lambda`` values share one factorisation per
  fold (Woodbury on the energy rows), and a grid can be screened on the first inner
  fold so that only its best points are cross-validated on all folds.

Energies are in eV, positions in Å, forces in eV/Å; gradients are ``-forces``.
"""

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.linalg
import torch
from ase import Atoms
from ase.optimize import BFGS
from ase.units import Bohr
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted

from asebo.kernels import GaussianKernel, SVDKernel, joint_covariance, solve_joint
from asebo.kernels.svd import svd_distance, svd_kernel_blocks_batched

MOLECULES = {"water": "O", "glycerol": "OCC(O)CO", "nonanol": "CCCCCCCCCO"}
"""SMILES of the named molecules; any other SMILES string is accepted as well."""

DISPLACEMENTS = {"water": 0.12, "glycerol": 0.06, "nonanol": 0.05}
"""Default standard deviation (Å) of the noise added to each coordinate.

Seed 003 does not state it; these values give, with GFN2-xTB, energy standard
deviations (the mean predictor's RMSE) near the paper's: 2.4 eV for water and
0.74 eV for glycerol.
"""

DEFAULT_DISPLACEMENT = 0.05
DATA_DIR = Path(__file__).parent / "data"


# ---------------------------------------------------------------------------------
# data sets
# ---------------------------------------------------------------------------------
def build_calculator(spec):
    """An ASE calculator from a spec ``NAME`` or ``NAME-MODE`` (``gpaw-lcao``).

    ``NAME`` is a preset of :func:`calculators.get_calculator`; ``MODE`` is passed as
    its ``mode`` keyword.
    """
    from calculators import get_calculator

    name, _, mode = str(spec).partition("-")
    return get_calculator(name, **({"mode": mode} if mode else {}))


def molecule_from_smiles(smiles, random_state=0):
    """A 3D molecule with hydrogens from SMILES: RDKit ETKDG embedding and MMFF relaxation.

    Parameters
    ----------
    smiles : str
        SMILES string, or a name of :data:`MOLECULES`.
    random_state : int
        Seed of the embedding.

    Returns
    -------
    ase.Atoms
    """
    from rdkit import Chem
    from rdkit.Chem import AllChem

    molecule = Chem.MolFromSmiles(MOLECULES.get(smiles, smiles))
    if molecule is None:
        raise ValueError(f"RDKit cannot parse the SMILES {smiles!r}")
    molecule = Chem.AddHs(molecule)
    if AllChem.EmbedMolecule(molecule, randomSeed=int(random_state)) != 0:
        raise ValueError(f"RDKit could not embed {smiles!r} in 3D")
    AllChem.MMFFOptimizeMolecule(molecule)
    numbers = [atom.GetAtomicNum() for atom in molecule.GetAtoms()]
    return Atoms(numbers, positions=molecule.GetConformer().GetPositions())


def relax_molecule(atoms, calculator, fmax=0.02, steps=200, prerelax=None):
    """Relax ``atoms`` with ``calculator`` by BFGS, optionally after a cheaper calculator.

    Parameters
    ----------
    atoms : ase.Atoms
    calculator : str or ase calculator
        Spec for :func:`build_calculator` or a calculator object.
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
        relaxed.calc = build_calculator(stage) if isinstance(stage, str) else stage
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
        return ConfigurationSet(self.numbers, self.equilibrium, self.positions[index],
                                self.energies[index], self.forces[index], dict(self.metadata))

    def save(self, path):
        """Write to ``path`` (``.npz``), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".part.npz")
        np.savez_compressed(temporary, numbers=self.numbers, equilibrium=self.equilibrium,
                            positions=self.positions, energies=self.energies,
                            forces=self.forces, metadata=np.array(json.dumps(self.metadata)))
        os.replace(temporary, path)

    @classmethod
    def load(cls, path):
        """Read a set written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as data:
            return cls(data["numbers"], data["equilibrium"], data["positions"],
                       data["energies"], data["forces"], json.loads(str(data["metadata"])))


def dataset_filename(molecule, calculator, displacement=None, random_state=0):
    """File name of a cached or shipped set, e.g. ``water_gpaw_d0.12_s0.npz``."""
    displacement = DISPLACEMENTS.get(molecule, DEFAULT_DISPLACEMENT) if displacement is None \
        else displacement
    return f"{molecule}_{calculator}_d{displacement:g}_s{random_state}.npz"


def default_cache_dir():
    """``$ASEBO_CACHE`` or ``~/.cache/asebo``, with a ``prediction`` subfolder."""
    root = os.environ.get("ASEBO_CACHE", Path.home() / ".cache" / "asebo")
    return Path(root) / "prediction"


def generate_dataset(molecule, calculator="gfn2", count=100, displacement=None,
                     random_state=0, path=None, fmax=0.02, prerelax=None, progress=False):
    """Relax a molecule, displace it and label the configurations (seed 003, Tables 1-2).

    Parameters
    ----------
    molecule : str
        A name of :data:`MOLECULES` or a SMILES string.
    calculator : str
        Spec for :func:`build_calculator`: ``gfn2``, ``gpaw``, ``gpaw-lcao``, ``emt``...
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
    displacement = DISPLACEMENTS.get(molecule, DEFAULT_DISPLACEMENT) if displacement is None \
        else float(displacement)
    metadata = {"molecule": molecule, "smiles": MOLECULES.get(molecule, molecule),
                "calculator": calculator, "displacement": displacement,
                "random_state": int(random_state), "fmax": fmax}
    data = _resumable(path, metadata)
    if data is None:
        atoms = relax_molecule(molecule_from_smiles(molecule, random_state),
                               calculator, fmax=fmax, prerelax=prerelax)
        data = ConfigurationSet(atoms.numbers, atoms.positions, np.empty((0, len(atoms), 3)),
                                np.empty(0), np.empty((0, len(atoms), 3)), metadata)
    done = data.n_labelled
    positions = displaced_positions(data.equilibrium, max(count, done), displacement,
                                    random_state)  # (count, n, 3)
    energies = np.full(len(positions), np.nan)
    forces = np.full(positions.shape, np.nan)
    energies[:done], forces[:done] = data.energies[:done], data.forces[:done]
    data = ConfigurationSet(data.numbers, data.equilibrium, positions, energies, forces,
                            metadata)
    if done < count:
        atoms = Atoms(data.numbers, positions=data.equilibrium)
        atoms.calc = build_calculator(calculator)
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
    same = all(data.metadata.get(key) == metadata[key]
               for key in ("smiles", "calculator", "displacement", "random_state"))
    return data if same else None


def load_dataset(molecule, calculator="gfn2", count=100, displacement=None, random_state=0,
                 cache_dir=None, generate=True, **generate_options):
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
        raise ValueError(f"only {have} configurations of {name} are stored and {count} were "
                         "asked for: allow generation or ask for fewer")
    if best is not None:
        best.save(cache / name)
    return generate_dataset(molecule, calculator, count, displacement, random_state,
                            path=cache / name, **generate_options)


# ---------------------------------------------------------------------------------
# descriptors
# ---------------------------------------------------------------------------------
def coulomb_eigenspectrum(numbers, positions):
    r"""Sorted eigenvalues of the Coulomb matrix (Rupp et al. 2012), in atomic units.

    ``C_ii = Z_i^2.4 / 2`` and ``C_ij = Z_i Z_j / |R_i - R_j|`` with distances in
    bohr; the eigenvalues, largest first, do not change under rotation, translation
    or a permutation of the atoms.

    Parameters
    ----------
    numbers : int array (n,)
    positions : array (m, n, 3) or (n, 3), Å

    Returns
    -------
    array (m, n) or (n,)
    """
    positions = np.asarray(positions, dtype=np.float64)
    single = positions.ndim == 2
    positions = positions[None] if single else positions
    charges = np.asarray(numbers, dtype=np.float64)  # (n,)
    if positions.ndim != 3 or positions.shape[1:] != (len(charges), 3):
        raise ValueError(f"positions must have shape (m, {len(charges)}, 3), "
                         f"got {positions.shape}")
    distances = np.linalg.norm(positions[:, :, None] - positions[:, None], axis=-1) / Bohr
    n = len(charges)
    off_diagonal = ~np.eye(n, dtype=bool)
    coulomb = np.empty_like(distances)  # (m, n, n)
    coulomb[:, off_diagonal] = (np.outer(charges, charges)[off_diagonal]
                                / distances[:, off_diagonal])
    coulomb[:, ~off_diagonal] = 0.5 * charges ** 2.4
    spectrum = np.linalg.eigvalsh(coulomb)[:, ::-1]  # (m, n), largest first
    return spectrum[0] if single else spectrum


def _check_positions(positions):
    positions = np.asarray(positions, dtype=np.float64)
    if positions.ndim != 3 or positions.shape[-1] != 3:
        raise ValueError(f"positions must have shape (m, n_atoms, 3), got {positions.shape}")
    if not np.isfinite(positions).all():
        raise ValueError("positions contain NaN or inf: remove those configurations")
    return positions


def _check_labels(positions, energies, forces):
    energies = np.asarray(energies, dtype=np.float64)
    if energies.shape != positions.shape[:1]:
        raise ValueError(f"expected {len(positions)} energies, got shape {energies.shape}")
    if not np.isfinite(energies).all():
        raise ValueError("energies contain NaN or inf: remove those configurations")
    if forces is not None:
        forces = np.asarray(forces, dtype=np.float64)
        if forces.shape != positions.shape:
            raise ValueError(f"forces must have the shape of positions {positions.shape}, "
                             f"got {forces.shape}")
        if not np.isfinite(forces).all():
            raise ValueError("forces contain NaN or inf: remove those configurations")
    return energies, forces


def _median_scale(distances):
    """Median of the off-diagonal squared distances, a data scale for ``gamma``."""
    off = distances[~np.eye(len(distances), dtype=bool)]
    return float(np.median(off)) if off.size else 1.0


# ---------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------
class MeanPredictor(BaseEstimator):
    """Predicts the mean training energy (the baseline of seed 003, Tables 1-2)."""

    name = "mean"
    uses_forces = False

    def fit(self, positions, energies, forces=None):
        """Store the mean of ``energies`` (m,); returns self."""
        positions = _check_positions(positions)
        energies, _ = _check_labels(positions, energies, None)
        self.mean_ = float(np.mean(energies))
        return self

    def predict(self, positions):
        """The mean energy for each configuration, (b,)."""
        check_is_fitted(self, "mean_")
        return np.full(len(_check_positions(positions)), self.mean_)


class _KernelRidge(BaseEstimator):
    """Kernel ridge regression on per-configuration observation blocks (seed 003, eq. 34).

    The prior mean is the mean training energy; ``lam`` regularises energies. After
    ``fit``, ``positive_definite_`` tells whether ``K + Lambda`` was positive definite
    (the improper SVD kernel need not be; the predictor only needs it invertible).
    Subclasses give the covariance of the observations (one block of ``block_size``
    rows per configuration, the energy first), the covariance of new energies with
    them, and the regularisation of each row.
    """

    uses_forces = False

    def block_size(self, n_atoms):
        """Observations per configuration."""
        return 1

    def covariance(self, positions):
        """Covariance of all observations of ``positions`` (m, n, 3), (m b, m b)."""
        raise NotImplementedError

    def cross_covariance(self, positions, training):
        """Covariance of the energies at ``positions`` with the training observations, (b, m b)."""
        raise NotImplementedError

    def regularisation(self, m, n_atoms):
        """Diagonal added to the covariance, (m b,)."""
        return np.full(m * self.block_size(n_atoms), float(self.lam))

    def gamma_scale(self, positions):
        """The ``gamma`` that puts the median pair at ``k = exp(-1)``."""
        raise NotImplementedError

    def observations(self, energies, forces, offset):
        """Targets ``[E - offset, -F]`` per configuration, (m b,)."""
        return np.asarray(energies, dtype=np.float64) - offset

    def fit(self, positions, energies, forces=None):
        """Solve ``(K + Lambda) alpha = y`` on the training observations; returns self."""
        positions = _check_positions(positions)
        energies, forces = _check_labels(positions, energies, forces)
        if self.uses_forces and forces is None:
            raise ValueError(f"{type(self).__name__} learns from forces: pass forces (m, n, 3)")
        self.offset_ = float(np.mean(energies))
        y = self.observations(energies, forces, self.offset_)  # (m b,)
        self.training_ = positions
        self.alpha_ = self._solve(positions, y)  # (m b,)
        return self

    def _solve(self, positions, y):
        K = self.covariance(positions)  # (N, N)
        K[np.diag_indices_from(K)] += self.regularisation(*positions.shape[:2])
        factor = _Factor(K)
        self.positive_definite_ = factor.positive_definite
        return factor.solve(y)

    def predict(self, positions):
        """Predicted energies (b,) by eq. 34, ``mu = k(X', X) (K + Lambda)^{-1} y``."""
        check_is_fitted(self, "alpha_")
        positions = _check_positions(positions)
        if positions.shape[1:] != self.training_.shape[1:]:
            raise ValueError(f"positions have {positions.shape[1]} atoms; the model was "
                             f"trained on {self.training_.shape[1]}")
        return self.offset_ + self.cross_covariance(positions, self.training_) @ self.alpha_


class EigenspectrumKRR(_KernelRidge):
    """KRR on Coulomb-matrix eigenspectra with ``exp(-gamma |e - e'|^2)`` (Rupp et al. 2012).

    Parameters
    ----------
    numbers : int array (n,)
        Atomic numbers of the molecule.
    gamma : float
        Gaussian kernel parameter (atomic units of the eigenvalues, squared, inverse).
    lam : float
        Ridge regularisation ``lambda`` (seed 003, eq. 34).
    """

    name = "eigenspectrum"

    def __init__(self, numbers=None, gamma=1e-3, lam=1e-6):
        self.numbers = numbers
        self.gamma = gamma
        self.lam = lam

    def _features(self, positions):
        if self.numbers is None:
            raise ValueError("EigenspectrumKRR needs the atomic numbers: pass numbers=...")
        return coulomb_eigenspectrum(self.numbers, positions)  # (m, n)

    def covariance(self, positions):
        return GaussianKernel(self.gamma)(self._features(positions))

    def cross_covariance(self, positions, training):
        return GaussianKernel(self.gamma)(self._features(positions), self._features(training))

    def gamma_scale(self, positions):
        features = self._features(positions)  # (m, n)
        return 1.0 / _median_scale(((features[:, None] - features[None]) ** 2).sum(-1))


class SVDKernelKRR(_KernelRidge):
    """KRR with the SVD kernel on energies only (seed 003, eqs. 10 and 34).

    Parameters
    ----------
    gamma : float
        ``k = exp(-gamma d / 2)``, Å⁻².
    lam : float
        Ridge regularisation ``lambda``.
    proper : bool
        Align by proper rotations only (see :mod:`asebo.kernels.svd`).
    """

    name = "svd"

    def __init__(self, gamma=1.0, lam=1e-6, proper=True):
        self.gamma = gamma
        self.lam = lam
        self.proper = proper

    def covariance(self, positions):
        return SVDKernel(self.gamma, self.proper)(positions)

    def cross_covariance(self, positions, training):
        return SVDKernel(self.gamma, self.proper)(positions, training)

    def gamma_scale(self, positions):
        return 2.0 / _median_scale(svd_distance(positions[:, None], positions[None],
                                                proper=self.proper))


class SVDDerivativeKRR(SVDKernelKRR):
    """The SVD kernel with derivatives: trained on energies and forces (seed 003, eqs. 11-14, 34).

    The observations of a configuration are its energy and the ``3n`` components of
    its gradient ``-F``; their joint covariance is :func:`asebo.kernels.joint_covariance`.
    The energy at new configurations is predicted by eq. 34 with
    ``k(X', X) = [k, dk/dZ]`` per training configuration.

    Parameters
    ----------
    gamma : float
        ``k = exp(-gamma d / 2)``, Å⁻².
    lam : float
        Regularisation of the energies, ``lambda`` (eV² relative to unit kernel variance).
    lam_deriv : float
        Regularisation of the gradient components, ``lambda_deriv``.
    proper : bool
        Align by proper rotations only.
    solver : {'cholesky', 'cg'}
        Dense factorisation (Cholesky, LU where the improper kernel makes the matrix
        indefinite), or conjugate gradients with the structured ``O(m^2 n)`` product
        of seed 003 eqs. 32-33 (the dense matrix is never formed).
    cg_tolerance : float
        Relative residual at which CG stops.
    cg_max_iter : int
        At most this many CG iterations (``linear_cg`` warns if it stops above
        ``cg_tolerance``).

    Attributes
    ----------
    solve_info_ : asebo.kernels.operators.SolveInfo
        How the last CG fit solved (iterations and residual).
    positive_definite_ : bool
        Whether ``K + Lambda`` of the last dense fit was positive definite.
    """

    name = "svd_deriv"
    uses_forces = True

    def __init__(self, gamma=1.0, lam=1e-6, lam_deriv=1e-4, proper=True, solver="cholesky",
                 cg_tolerance=1e-8, cg_max_iter=5000):
        self.gamma = gamma
        self.lam = lam
        self.lam_deriv = lam_deriv
        self.proper = proper
        self.solver = solver
        self.cg_tolerance = cg_tolerance
        self.cg_max_iter = cg_max_iter

    def block_size(self, n_atoms):
        return 3 * n_atoms + 1

    def regularisation(self, m, n_atoms):
        per_configuration = np.concatenate([[self.lam], np.full(3 * n_atoms, self.lam_deriv)])
        return np.tile(per_configuration, m).astype(np.float64)  # (m (3n+1),)

    def observations(self, energies, forces, offset):
        m = len(energies)
        return np.concatenate([(np.asarray(energies) - offset)[:, None],
                               -np.asarray(forces).reshape(m, -1)], axis=1).ravel()

    def covariance(self, positions):
        return joint_covariance(positions, self.gamma, self.proper).to_dense().numpy()

    def cross_covariance(self, positions, training):
        k, _, dk_dZ = svd_kernel_blocks_batched(positions, training, self.gamma, self.proper,
                                                second=False)  # (b, m), _, (b, m, n, 3)
        b, m = k.shape
        return np.concatenate([k[..., None], dk_dZ.reshape(b, m, -1)], axis=-1).reshape(b, -1)

    def _solve(self, positions, y):
        if self.solver == "cholesky":
            return super()._solve(positions, y)
        if self.solver != "cg":
            raise ValueError(f"solver must be 'cholesky' or 'cg', got {self.solver!r}")
        operator = joint_covariance(positions, self.gamma, self.proper)
        noise = torch.as_tensor(self.regularisation(*positions.shape[:2]))
        alpha, self.solve_info_ = solve_joint(operator, torch.as_tensor(y), noise,
                                              method="cg", tolerance=self.cg_tolerance,
                                              max_iter=self.cg_max_iter)
        return alpha.numpy()


MODELS = {
    "mean": MeanPredictor,
    "eigenspectrum": EigenspectrumKRR,
    "svd": SVDKernelKRR,
    "svd_deriv": SVDDerivativeKRR,
}
"""Model names of the benchmark (rows of seed 003, Tables 1-2)."""


def make_model(name, numbers=None, **params):
    """A model of :data:`MODELS` by name; ``numbers`` is used by the eigenspectrum model."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    if name == "eigenspectrum":
        params["numbers"] = numbers
    return MODELS[name](**params)


# ---------------------------------------------------------------------------------
# hyperparameters
# ---------------------------------------------------------------------------------
DEFAULT_GRIDS = {
    "eigenspectrum": {"gamma_factor": [0.1, 0.3, 1.0, 3.0, 10.0],
                      "lam": [1e-8, 1e-6, 1e-4, 1e-2, 1e0]},
    "svd": {"gamma_factor": [0.1, 0.3, 1.0, 3.0, 10.0],
            "lam": [1e-8, 1e-6, 1e-4, 1e-2, 1e0]},
    "svd_deriv": {"gamma_factor": [0.1, 0.3, 1.0, 3.0, 10.0],
                  "lam": [1e-6, 1e-4, 1e-2, 1e0],
                  "lam_deriv": [1e-3, 1e-2, 1e-1]},
}
"""Hyperparameter grids. ``gamma = gamma_factor * model.gamma_scale(training set)``,
the ``gamma`` that puts the median pair of training configurations at ``k = exp(-1)``.
"""


def configuration_folds(n_configurations, n_folds, random_state=0):
    """Shuffled k-fold split of configurations: a list of ``(train, test)`` index arrays."""
    if not 2 <= n_folds <= n_configurations:
        raise ValueError(f"n_folds must be between 2 and the number of configurations "
                         f"({n_configurations}), got {n_folds}")
    splitter = KFold(n_folds, shuffle=True, random_state=random_state)
    return list(splitter.split(np.arange(n_configurations)))


def _observation_rows(configurations, block):
    """Rows of the observations of ``configurations`` in a per-configuration layout."""
    return (np.asarray(configurations)[:, None] * block + np.arange(block)).ravel()


class _Factor:
    """Factors of a symmetric matrix ``A`` for solves: Cholesky, or LU when ``A`` is indefinite.

    The SVD kernel is improper (seed 003): its joint covariance can have small
    negative eigenvalues. The KRR predictor of eq. 34 only needs ``K + Lambda`` to be
    invertible, so an indefinite matrix is solved by LU; the log-determinant (for the
    marginal likelihood) exists only when ``positive_definite``.
    """

    def __init__(self, A):
        try:
            self._cholesky = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
            self.positive_definite = True
        except np.linalg.LinAlgError:
            self._lu = scipy.linalg.lu_factor(A, check_finite=False)
            self.positive_definite = False

    def solve(self, b):
        if self.positive_definite:
            return scipy.linalg.cho_solve(self._cholesky, b, check_finite=False)
        return scipy.linalg.lu_solve(self._lu, b, check_finite=False)

    def logdet(self):
        """``log|A|``, NaN unless ``A`` is positive definite."""
        if not self.positive_definite:
            return np.nan
        return 2.0 * np.log(np.diag(self._cholesky[0])).sum()


def _ridge_path(A, energy_rows, y, increments):
    r"""Solutions and log-determinants of ``A + delta P P^T`` for several ``delta``.

    ``P`` selects the energy rows, so ``delta`` raises the energy regularisation
    ``lambda`` alone. One factorisation of ``A`` serves every ``delta`` through the
    Woodbury identity, ``(A + d P P^T)^{-1} = A^{-1} - A^{-1} P (I / d + C)^{-1} P^T A^{-1}``
    with ``C = P^T A^{-1} P``, and the determinant lemma,
    ``log|A + d P P^T| = log|A| + e log d + log|I / d + C|``.

    Returns
    -------
    list of (alpha (N,), logdet) per increment; ``logdet`` is NaN where ``A`` is not
    positive definite, and ``alpha`` is NaN where a matrix is singular.
    """
    factor = _Factor(A)
    alpha = factor.solve(y)  # (N,)
    unit = np.zeros((len(y), len(energy_rows)))
    unit[energy_rows, np.arange(len(energy_rows))] = 1.0
    B = factor.solve(unit)  # (N, e): A^{-1} P
    C = B[energy_rows]  # (e, e)
    path = []
    for delta in increments:
        if delta == 0:
            path.append((alpha, factor.logdet()))
            continue
        inner = _Factor(np.eye(len(energy_rows)) / delta + C)
        updated = alpha - B @ inner.solve(alpha[energy_rows])
        path.append((updated, factor.logdet() + len(energy_rows) * np.log(delta)
                     + inner.logdet()))
    return path


def _cv_squared_errors(model, K, energies, forces, noise, lams, folds, block):
    """Squared errors of the held-out energies, summed over ``folds``, for each ``lam``.

    The base ``noise`` (N,) holds ``lams[0]`` on the energy rows; the other ``lam``
    values come from the same factorisation per fold (:func:`_ridge_path`).

    Returns
    -------
    array (len(lams),)
        NaN where a matrix was singular.
    """
    squared = np.zeros(len(lams))
    increments = np.asarray(lams) - lams[0]
    for train, test in folds:
        rows = _observation_rows(train, block)
        A = K[np.ix_(rows, rows)]
        A[np.diag_indices_from(A)] += noise[rows]
        offset = np.mean(energies[train])
        y = model.observations(energies[train], None if forces is None else forces[train],
                               offset)
        path = _ridge_path(A, np.arange(len(train)) * block, y, increments)
        cross = K[np.ix_(test * block, rows)]  # (t, N)
        for i, (alpha, _) in enumerate(path):
            squared[i] += np.sum((offset + cross @ alpha - energies[test]) ** 2)
    return squared


def _evidence_scores(model, K, energies, forces, noise, lams, block):
    r"""``-log p(y)`` per observation for each ``lam``, GP covariance ``s^2 (K + Lambda)``.

    The signal variance is profiled out, ``s^2 = y^T (K + Lambda)^{-1} y / N``, so
    ``-log p = N/2 log s^2 + 1/2 log|K + Lambda| + const`` (seed 004, eq. 27): the
    ridge regularisations of eq. 34 are noise variances relative to ``s^2``.
    """
    A = K.copy()
    A[np.diag_indices_from(A)] += noise
    y = model.observations(energies, forces, np.mean(energies))  # (N,)
    path = _ridge_path(A, np.arange(len(energies)) * block, y, np.asarray(lams) - lams[0])
    scores = []
    for alpha, logdet in path:
        if not np.isfinite(logdet):
            scores.append(np.inf)
            continue
        outputscale = max(float(y @ alpha) / len(y), 1e-300)
        scores.append(0.5 * np.log(outputscale) + 0.5 * logdet / len(y))
    return np.array(scores)


@dataclass
class Selection:
    """Result of :func:`select_hyperparameters`.

    Attributes
    ----------
    params : dict
        The chosen hyperparameters (``gamma``, ``lam``, ``lam_deriv``).
    score : float
        Inner-CV RMSE (eV) or negative log evidence per observation.
    scores : list of (dict, float)
        Every grid point scored on all folds, and its score.
    screening : list of (dict, float)
        With screening, every grid point and its RMSE (eV) on the first inner fold.
    """

    params: dict
    score: float
    scores: list
    screening: list = field(default_factory=list)


def _grid_points(grid):
    """Grid points without ``lam``: dicts of ``gamma_factor`` and the other regularisations."""
    names = [key for key in grid if key != "lam"]
    values = np.meshgrid(*[grid[key] for key in names], indexing="ij")
    return [dict(zip(names, (float(v.flat[i]) for v in values))) for i in range(values[0].size)]


def _score_points(model, positions, points, lams, scale, score):
    """``score(candidate, K, noise)`` (an array over ``lams``) at every point, in order.

    The covariance ``K`` is computed once per ``gamma_factor``; ``noise`` holds
    ``lams[0]`` on the energy rows and the point's other regularisations.
    """
    m, n = positions.shape[:2]
    values = [None] * len(points)
    for factor in dict.fromkeys(point["gamma_factor"] for point in points):
        candidate = clone(model).set_params(gamma=factor * scale)
        K = candidate.covariance(positions)  # (m b, m b)
        for i, point in enumerate(points):
            if point["gamma_factor"] != factor:
                continue
            others = {key: value for key, value in point.items() if key != "gamma_factor"}
            noise = candidate.set_params(lam=lams[0], **others).regularisation(m, n)  # (m b,)
            values[i] = score(candidate, K, noise)
    return np.array(values)  # (points, lams)


def _cv_rmse(model, positions, energies, forces, points, lams, scale, folds, screen):
    """Inner-CV RMSE of the grid points, screened by the first fold if ``screen``.

    With ``screen``, every point is scored on the first fold and only the ``screen``
    best (each by its best ``lam``) on the other folds.

    Returns
    -------
    kept : int array (k,)
        The points cross-validated on all folds (all of them without screening).
    rmse : array (k, len(lams))
        Their inner-CV RMSE (eV), ``inf`` where a matrix was singular.
    first : array (len(points), len(lams)) or None
        The first-fold RMSE of every point when screening.
    """
    block = model.block_size(positions.shape[1])

    def squared(subset):
        return lambda candidate, K, noise: _cv_squared_errors(
            candidate, K, energies, forces, noise, lams, subset, block)

    if not screen or screen >= len(points):
        total = _score_points(model, positions, points, lams, scale, squared(folds))
        return np.arange(len(points)), _finite(np.sqrt(total / len(energies))), None
    first = _score_points(model, positions, points, lams, scale, squared(folds[:1]))
    first_rmse = _finite(np.sqrt(first / len(folds[0][1])))  # (points, lams)
    kept = np.argsort(first_rmse.min(axis=1), kind="stable")[:screen]
    rest = _score_points(model, positions, [points[i] for i in kept], lams, scale,
                         squared(folds[1:]))
    return kept, _finite(np.sqrt((first[kept] + rest) / len(energies))), first_rmse


def _finite(values):
    """``values`` with NaN (a singular matrix) replaced by ``inf``."""
    return np.where(np.isfinite(values), values, np.inf)


def select_hyperparameters(model, positions, energies, forces=None, grid=None, method="cv",
                           n_folds=4, random_state=0, screen=None):
    """Choose a kernel model's hyperparameters on a grid (seed 003, "Application ...").

    ``method='cv'``: the smallest RMSE of an inner ``n_folds``-fold cross-validation
    on the given configurations, as in the paper; ``method='ml'``: the largest
    marginal likelihood (seed 004, eq. 27) of the same configurations. The
    covariance is computed once per ``gamma`` and sliced for every fold; one
    Cholesky factorisation per fold serves every ``lam`` (:func:`_ridge_path`).

    Parameters
    ----------
    model : _KernelRidge
        The model to tune (its other parameters are kept).
    positions : array (m, n, 3)
    energies : array (m,)
    forces : array (m, n, 3), optional
        Needed by models that learn from forces.
    grid : dict, optional
        ``gamma_factor`` (multiples of ``model.gamma_scale``), ``lam`` and the
        model's other regularisations; default :data:`DEFAULT_GRIDS` for the model.
    method : {'cv', 'ml'}
    n_folds : int
    random_state : int
        Seed of the inner folds.
    screen : int, optional
        Successive halving for ``method='cv'``: score every grid point (every ``lam``
        at once) on the first inner fold and cross-validate only the ``screen`` best
        on all folds. It cuts the factorisations from ``points x n_folds`` to
        ``points + screen x (n_folds - 1)``.

    Returns
    -------
    Selection
    """
    if method not in ("cv", "ml"):
        raise ValueError(f"method must be 'cv' or 'ml', got {method!r}")
    positions = _check_positions(positions)
    energies, forces = _check_labels(positions, energies, forces)
    if model.uses_forces and forces is None:
        raise ValueError(f"{type(model).__name__} learns from forces: pass forces (m, n, 3)")
    grid = DEFAULT_GRIDS[model.name] if grid is None else grid
    lams = sorted(float(lam) for lam in grid["lam"])
    points = _grid_points(grid)
    scale = model.gamma_scale(positions)
    first = None
    if method == "cv":
        folds = configuration_folds(len(positions), min(n_folds, len(positions)), random_state)
        kept, values, first = _cv_rmse(model, positions, energies, forces, points, lams,
                                       scale, folds, screen)
    else:
        block = model.block_size(positions.shape[1])

        def evidence(candidate, K, noise):
            return _evidence_scores(candidate, K, energies, forces, noise, lams, block)

        kept = np.arange(len(points))
        values = _score_points(model, positions, points, lams, scale, evidence)
    scores = [(_params(points[i], lam, scale), float(value))
              for i, row in zip(kept, values) for lam, value in zip(lams, row)]
    screening = [] if first is None else [
        (_params(point, lam, scale), float(value))
        for point, row in zip(points, first) for lam, value in zip(lams, row)]
    params, score = min(scores, key=lambda item: item[1])
    if not np.isfinite(score):
        raise ValueError("no grid point gave a positive definite covariance: "
                         "add larger regularisation values to the grid")
    return Selection(params, score, scores, screening)


def _params(point, lam, scale):
    """Model parameters of a grid point: ``gamma`` from ``gamma_factor``, and ``lam``."""
    others = {key: value for key, value in point.items() if key != "gamma_factor"}
    return {"gamma": point["gamma_factor"] * scale, "lam": lam, **others}


# ---------------------------------------------------------------------------------
# assessment
# ---------------------------------------------------------------------------------
@dataclass
class FoldResult:
    """One outer fold of one model: test RMSE (eV), chosen parameters and times (s).

    ``search_seconds`` and ``fit_seconds`` are wall-clock, the ``cpu`` ones the CPU
    time of this process; ``solver`` holds the CG iterations and relative residual of a
    derivative model's fit.
    """

    rmse: float
    params: dict
    search_seconds: float
    fit_seconds: float
    training_size: int
    solver: dict = field(default_factory=dict)
    search_cpu_seconds: float = 0.0
    fit_cpu_seconds: float = 0.0


def _clock():
    """Wall-clock and process CPU seconds, (2,)."""
    return np.array([time.perf_counter(), time.process_time()])


def evaluate_model(data, name, selection="cv", folds=None, training_size=None, n_folds=5,
                   inner_folds=4, grid=None, search_configs=None, screen=None, random_state=0,
                   **model_params):
    """Outer cross-validation of one model (seed 003, Tables 1-2; Fig. 1 with ``training_size``).

    For every outer fold the hyperparameters are chosen on the training part
    (:func:`select_hyperparameters`), the model is refitted on it and the RMSE of the
    held-out energies is recorded.

    Parameters
    ----------
    data : ConfigurationSet
    name : str
        A key of :data:`MODELS`.
    selection : {'cv', 'ml'}
        Inner cross-validation or marginal likelihood.
    folds : list of (train, test), optional
        Outer folds; default :func:`configuration_folds` with ``n_folds``.
    training_size : int, optional
        Use only the first ``training_size`` configurations of each (shuffled) training
        part: a point of a learning curve.
    inner_folds : int
    grid : dict, optional
    search_configs : int, optional
        Choose hyperparameters on at most this many training configurations (a seeded
        subset) and fit on all: what makes 500 configurations affordable.
    screen : int, optional
        Cross-validate only this many grid points on all inner folds, the best on the
        first (see :func:`select_hyperparameters`).
    random_state : int
    **model_params
        Fixed model parameters (``solver='cg'``, ``proper=False``).

    Returns
    -------
    list of FoldResult
    """
    labelled = data.n_labelled
    if labelled < len(data):
        raise ValueError(f"only {labelled} of {len(data)} configurations are labelled")
    if folds is None:
        folds = configuration_folds(len(data), n_folds, random_state)
    results = []
    for index, (train, test) in enumerate(folds):
        train = np.random.default_rng([random_state, index]).permutation(train)
        train = train[:training_size] if training_size else train
        model = make_model(name, data.numbers, **model_params)
        start = _clock()
        params = {}
        if name != "mean":
            search = train[:search_configs] if search_configs else train
            forces = data.forces[search] if model.uses_forces else None
            params = select_hyperparameters(model, data.positions[search],
                                            data.energies[search], forces, grid, selection,
                                            inner_folds, random_state, screen).params
            model.set_params(**params)
        searched = _clock()
        model.fit(data.positions[train], data.energies[train],
                  data.forces[train] if model.uses_forces else None)
        predicted = model.predict(data.positions[test])
        fitted = _clock()
        rmse = float(np.sqrt(np.mean((predicted - data.energies[test]) ** 2)))
        info = getattr(model, "solve_info_", None)
        solver = {} if info is None else {"method": info.method, "iterations": info.iterations,
                                          "residual": info.residual}
        (search_wall, search_cpu), (fit_wall, fit_cpu) = searched - start, fitted - searched
        results.append(FoldResult(rmse, params, search_wall, fit_wall, len(train), solver,
                                  search_cpu, fit_cpu))
    return results
