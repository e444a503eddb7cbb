"""What a comparison campaign runs: its settings, its key, its perturbed starts.

A campaign relaxes every molecule from every start with every optimizer, as in the
comparison of Bayesian optimization with L-BFGS by Wong and Kolter (section
"Bayesian optimization", Figs. 2-3: 40 randomly perturbed starts per molecule). The
settings that change results (calculator, force threshold, step limit, noise,
seed) make the campaign's key, stored with every run so that runs of two campaigns
are never mixed in one database.
"""

import hashlib
import json
import pickle
import zlib
from dataclasses import dataclass

import numpy as np
from ase import Atoms

from asebo.campaign.optimizer_names import OPTIMIZER_NAMES
from asebo.extras import missing_optimizer_package
from asebo.model.priors import MODEL_PRIORS
from calculators import calculator_key, parse_preset

PRIOR_SEPARATOR = "+"


@dataclass
class Campaign:
    """The settings shared by every run of a campaign.

    Parameters
    ----------
    calc : str or ase calculator
        Preset of :func:`calculators.get_calculator`, with options or without
        (``'gfn2'``, ``'gpaw:h=0.25,vacuum=3.5'``), or a calculator that can be
        pickled, copied for each run.
    fmax : float
        Convergence threshold on the largest force, eV/Å.
    steps : int
        Largest number of optimizer steps of one run.
    noise : float
        Standard deviation in Å of the Gaussian noise added to every coordinate of a
        perturbed start.
    seed : int
        Seed of the perturbations.

    Raises
    ------
    ValueError
        For an unknown calculator name or a setting out of range.
    """

    calc: object = "gfn2"
    fmax: float = 0.05
    steps: int = 200
    noise: float = 0.1
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.calc, str):
            self.calc = preset_spec(self.calc)
        elif not hasattr(self.calc, "get_potential_energy"):
            raise ValueError(
                "calc must be a preset name (gfn2, gfn1, gpaw, emt, lj) or an "
                f"ASE calculator, got {type(self.calc).__name__}"
            )
        else:
            try:
                pickle.dumps(self.calc)
            except (TypeError, pickle.PicklingError, AttributeError) as error:
                raise ValueError(
                    f"the {type(self.calc).__name__} calculator cannot be copied for each "
                    f"run ({error}): give a preset with options instead, such as "
                    "'gpaw:h=0.25,vacuum=3.5'"
                ) from None
        if not (np.isfinite(self.fmax) and self.fmax > 0):
            raise ValueError(f"fmax must be a positive force in eV/Å, got {self.fmax}")
        if int(self.steps) != self.steps or self.steps < 1:
            raise ValueError(f"steps must be a positive whole number, got {self.steps}")
        if not (np.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"noise must be a standard deviation >= 0 in Å, got {self.noise}")
        if int(self.seed) != self.seed or self.seed < 0:
            raise ValueError(f"seed must be a whole number >= 0, got {self.seed}")
        self.fmax, self.steps = float(self.fmax), int(self.steps)
        self.noise, self.seed = float(self.noise), int(self.seed)

    def settings(self):
        """The settings that make the key, as stored with every run.

        Returns
        -------
        dict
            ``calc`` (preset name or :func:`calculators.calculator_key`),
            ``target_fmax``, ``max_steps``, ``noise``, ``seed``.
        """
        calc = self.calc if isinstance(self.calc, str) else calculator_key(self.calc)
        return {
            "calc": calc,
            "target_fmax": self.fmax,
            "max_steps": self.steps,
            "noise": self.noise,
            "seed": self.seed,
        }

    @property
    def key(self):
        """16 hex digits of a SHA-256 of :meth:`settings`."""
        text = json.dumps(self.settings(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Run:
    """One relaxation of a campaign.

    Attributes
    ----------
    molecule : str
        The molecule's label.
    optimizer : str
        The optimizer's label, ``'bo+gfn1'`` for ``bo`` with a GFN1-xTB prior.
    start : int
        0 for the reference geometry, 1, 2, ... for the perturbed starts.
    atoms : ase.Atoms
        The start geometry.
    reference : str
        :func:`geometry_fingerprint` of the molecule's reference geometry.
    """

    molecule: str
    optimizer: str
    start: int
    atoms: Atoms
    reference: str

    @property
    def name(self):
        """``(molecule, optimizer, start)``, what identifies the run in a database."""
        return self.molecule, self.optimizer, self.start


def parse_optimizer(label, prior=None):
    """The label, the optimizer and the calculator prior of an ``--optimizers`` entry.

    Parameters
    ----------
    label : str
        A key of :data:`asebo.campaign.relax.OPTIMIZERS`, or ``'bo+NAME'`` for ``bo`` with the
        calculator preset ``NAME`` as prior mean (Δ-learning) or with a prior of
        :data:`asebo.model.priors.MODEL_PRIORS` (``'bo+max'``).
    prior : str, optional
        Prior given to a plain ``'bo'``.

    Returns
    -------
    label : str
        ``'bo+gfn1'`` when ``bo`` gets the prior ``gfn1``.
    optimizer : str
    prior : str or None

    Raises
    ------
    ValueError
        For an unknown optimizer or prior, a prior on another optimizer than ``bo``, or
        ``sella`` or ``geometric`` when its package is not installed.
    """
    optimizer, separator, named_prior = str(label).partition(PRIOR_SEPARATOR)
    optimizer = optimizer.strip().lower()
    if separator and not named_prior.strip():
        raise ValueError(f"{label!r} names no prior after {PRIOR_SEPARATOR!r}: e.g. bo+gfn1")
    if optimizer not in OPTIMIZER_NAMES:
        raise ValueError(
            f"unknown optimizer {label!r}: choose among {', '.join(OPTIMIZER_NAMES)}"
            f" or bo{PRIOR_SEPARATOR}PRIOR (e.g. bo+gfn1)"
        )
    missing = missing_optimizer_package(optimizer)
    if missing:
        raise ValueError(missing)
    chosen = named_prior or (prior if optimizer == "bo" else None)
    if named_prior and optimizer != "bo":
        raise ValueError(f"{label!r}: only bo takes a calculator prior")
    if chosen is None:
        return optimizer, optimizer, None
    if chosen in MODEL_PRIORS:
        return f"{optimizer}{PRIOR_SEPARATOR}{chosen}", optimizer, chosen
    try:
        chosen = preset_spec(chosen)
    except ValueError as error:
        raise ValueError(f"unknown prior in {label!r}: {error}") from None
    return f"{optimizer}{PRIOR_SEPARATOR}{chosen}", optimizer, chosen


def preset_spec(spec):
    """The canonical form of a calculator preset with options, ``'gpaw:h=0.25,...'``.

    Options are sorted and their values written as Python literals, so one calculator
    always gives one campaign key.

    Parameters
    ----------
    spec : str
        See :func:`calculators.parse_preset`.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        For an unknown preset or a malformed option.
    """
    name, options = parse_preset(spec)
    if not options:
        return name
    return f"{name}:" + ",".join(f"{key}={options[key]!r}" for key in sorted(options))


def start_indices(starts):
    """The start numbers of ``--starts``: ``[0]`` (the geometry as given) for 0, else 1..N."""
    if int(starts) != starts or starts < 0:
        raise ValueError(f"starts must be a whole number >= 0, got {starts}")
    return [0] if starts == 0 else list(range(1, int(starts) + 1))


def perturbed_start(atoms, molecule, start, noise, seed):
    """A start geometry: the reference with Gaussian noise on every coordinate.

    Start 0 is the reference itself. Start ``i > 0`` adds independent normal noise of
    standard deviation ``noise`` to each of the ``3n`` coordinates, drawn from a
    generator seeded by ``(seed, CRC-32 of molecule, i)``: the same start every time
    and for every optimizer, and a start that does not change when more starts are
    added to a campaign (Wong and Kolter, section "Bayesian optimization": "the optimization
    is repeated for 40 randomly perturbed starting configurations").

    Parameters
    ----------
    atoms : ase.Atoms
        The reference geometry; not modified.
    molecule : str
        The molecule's label (part of the seed).
    start : int
        The start number.
    noise : float
        Standard deviation in Å.
    seed : int

    Returns
    -------
    ase.Atoms
        A copy without calculator.
    """
    perturbed = atoms.copy()
    perturbed.calc = None
    if start == 0:
        return perturbed
    rng = np.random.default_rng([int(seed), zlib.crc32(molecule.encode()), int(start)])
    displacement = rng.normal(0.0, noise, size=(len(atoms), 3))  # (n, 3)
    perturbed.set_positions(atoms.get_positions() + displacement)
    return perturbed


def geometry_fingerprint(atoms):
    """16 hex digits of a SHA-256 of the atomic numbers and positions (to 1e-6 Å), and
    of what else makes another system of them where it is set: initial charges and
    magnetic moments (an ion, another spin state), a periodic cell."""
    numbers = np.asarray(atoms.numbers, dtype=np.int64)  # (n,)
    positions = np.round(np.asarray(atoms.positions, dtype=np.float64), 6) + 0.0  # (n, 3)
    parts = [numbers.tobytes(), positions.tobytes()]
    for values in (atoms.get_initial_charges(), atoms.get_initial_magnetic_moments()):
        if np.any(values != 0):
            parts.append(np.round(np.asarray(values, dtype=np.float64), 6).tobytes())
    if np.any(atoms.pbc):
        cell = np.round(np.asarray(atoms.cell, dtype=np.float64), 6) + 0.0  # (3, 3)
        parts += [np.asarray(atoms.pbc, dtype=np.int8).tobytes(), cell.tobytes()]
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def plan_runs(molecules, optimizers, starts, campaign, prior=None):
    """Every run of a campaign, molecule by molecule, start by start.

    Parameters
    ----------
    molecules : list of (str, ase.Atoms)
        Labels and reference geometries (see :func:`asebo.campaign.load_molecule`).
    optimizers : list of str
        ``--optimizers`` entries (see :func:`parse_optimizer`).
    starts : int
        0 for the reference geometry only, N for N perturbed starts.
    campaign : Campaign
    prior : str, optional
        Calculator prior of plain ``bo`` entries.

    Returns
    -------
    list of Run

    Raises
    ------
    ValueError
        For repeated molecule labels or optimizers, or no molecule or optimizer.
    """
    labels = [parse_optimizer(entry, prior)[0] for entry in optimizers]
    names = [name for name, _ in molecules]
    for kind, items in (("molecule", names), ("optimizer", labels)):
        if not items:
            raise ValueError(f"no {kind} given")
        repeated = sorted({item for item in items if items.count(item) > 1})
        if repeated:
            raise ValueError(
                f"{kind} {', '.join(repeated)} given twice: rename one (a file "
                "is labelled by its name without suffix) or drop the repeat"
            )
    runs = []
    for name, atoms in molecules:
        reference = geometry_fingerprint(atoms)
        for start in start_indices(starts):
            geometry = perturbed_start(atoms, name, start, campaign.noise, campaign.seed)
            runs.extend(Run(name, label, start, geometry, reference) for label in labels)
    return runs
