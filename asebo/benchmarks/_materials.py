"""Force calls to relax periodic systems, several optimizers side by side.

The machinery of ``asebo bench surfaces``, ``asebo bench bulk`` and ``asebo bench
cells``: a set of :class:`MaterialSystem`, each relaxed from a few deterministic starts
(free atoms displaced at random with a fixed seed, the cell strained for cell
relaxations) with each optimizer to ``--fmax``, and one table of the force calls per
start, the totals, the ratios of each total to GPMin's and BFGS's, failures, and final
energies more than 0.01 eV above the lowest any optimizer found from the same start.
"""

import json
import os
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.constraints import FixAtoms

from asebo.benchmarks._options import positive_float, positive_int

OPTIMIZERS = ["bo", "bfgs", "lbfgs", "fire", "gpmin", "preconlbfgs", "sella"]
"""The optimizers a materials benchmark runs by default."""

HIGHER_MINIMUM = 0.01
"""eV above the lowest final energy from the same start that flags an endpoint."""


@dataclass(frozen=True)
class MaterialSystem:
    """One periodic system of a benchmark set and how its starts are made.

    Attributes
    ----------
    name : str
        Unique within its set, e.g. ``'Cu111_adatom'``.
    atoms : ase.Atoms
        The unperturbed structure, periodic, with its :class:`~ase.constraints.FixAtoms`
        constraint if any; not modified.
    description : str
        One line for ``--list``.
    amplitude : float
        Every Cartesian component of every free atom's displacement in a start is drawn
        uniformly from ``[-amplitude, amplitude]``, Å.
    strain : float
        Every component of the symmetric strain applied to the cell in a start is drawn
        uniformly from ``[-strain, strain]`` (0: the cell is kept).
    calc_options : dict
        Keyword arguments of the calculator preset for this system (k-points, a cutoff);
        options written in the preset's name (``--calc gpaw:ecut=500``) override them.
    """

    name: str
    atoms: Atoms
    description: str
    amplitude: float = 0.1
    strain: float = 0.0
    calc_options: dict = field(default_factory=dict)

    def fixed(self):
        """Indices of the atoms held by a FixAtoms constraint, sorted."""
        indices = [c.index for c in self.atoms.constraints if isinstance(c, FixAtoms)]
        return np.unique(np.concatenate(indices)) if indices else np.array([], dtype=int)

    def start(self, index):
        """Start ``index`` (0, 1, ...): the strained cell, then the displaced free atoms.

        Parameters
        ----------
        index : int

        Returns
        -------
        ase.Atoms
            A new Atoms with the system's constraints; the same for the same index.
        """
        rng = np.random.default_rng([index, zlib.crc32(self.name.encode())])
        atoms = self.atoms.copy()
        if self.strain:
            upper = np.triu(rng.uniform(-self.strain, self.strain, (3, 3)))
            strain = upper + np.triu(upper, 1).T  # (3, 3) symmetric
            atoms.set_cell(atoms.cell.array @ (np.eye(3) + strain), scale_atoms=True)
        displacement = rng.uniform(-self.amplitude, self.amplitude, (len(atoms), 3))  # (n, 3)
        displacement[self.fixed()] = 0.0
        atoms.set_positions(atoms.positions + displacement, apply_constraint=False)
        return atoms


def fix_bottom_half(slab):
    """Fix the atoms of ``slab`` below its mid-height (the bottom two of four layers).

    Call it before adding adsorbates, which then stay free.

    Parameters
    ----------
    slab : ase.Atoms
        Modified in place.

    Returns
    -------
    ase.Atoms
        ``slab``.
    """
    z = slab.positions[:, 2]
    middle = 0.5 * (z.min() + z.max())
    slab.set_constraint(FixAtoms(indices=np.flatnonzero(z < middle)))
    return slab


def add_arguments(parser, optimizers=OPTIMIZERS, steps=300):
    """The options of a materials benchmark."""
    parser.add_argument(
        "--systems",
        nargs="+",
        default=None,
        help="names or substrings of names of the systems to run (default: all; see --list)",
    )
    parser.add_argument("--list", action="store_true", help="list the systems and exit")
    parser.add_argument(
        "--optimizers",
        nargs="+",
        default=optimizers,
        help="bo, bfgs, lbfgs, fire, gpmin, preconlbfgs (PreconLBFGS with the Exp "
        "preconditioner), sella (pip install 'asebo[sella]'); 'bo+NAME' runs bo with the "
        "prior NAME (a model prior or a calculator preset)",
    )
    add_kappa(parser)
    parser.add_argument("--starts", type=int, default=2, help="starts per system")
    parser.add_argument("--fmax", type=positive_float, default=0.05)
    parser.add_argument("--steps", type=positive_int, default=steps)
    parser.add_argument("--jobs", type=positive_int, default=1)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every run's figures here"
    )


def add_kappa(parser):
    """The ``--kappa`` option: bo's weight of the uncertainty in its search's bound."""
    parser.add_argument(
        "--kappa",
        type=float,
        default=None,
        help="bo's weight of the uncertainty in mu - kappa sigma; < 0 penalises "
        "uncertain steps (default: bo's own, 0.1 below 90 free coordinates, -3 from 90)",
    )


def bo_options(probe=None, kappa=None):
    """bo's keyword arguments for a ``--symmetry-probe`` of ``probe`` Å and a
    ``--kappa`` (None: bo's defaults)."""
    options = {}
    if probe is not None:
        from asebo.optimize.settings import SpecialCases

        options["special_cases"] = SpecialCases(symmetry_probe=probe)
    if kappa is not None:
        options["kappa"] = kappa
    return options or None


def select(systems, wanted):
    """The systems whose name contains one of ``wanted`` (all when ``wanted`` is empty)."""
    if not wanted:
        return list(systems)
    chosen = [s for s in systems if any(w in s.name for w in wanted)]
    if not chosen:
        names = ", ".join(s.name for s in systems)
        raise SystemExit(f"no system matches {' '.join(wanted)}: choose among {names}")
    return chosen


def check_optimizers(labels):
    """Exit with a message for an unknown optimizer or one whose package is missing."""
    from asebo.campaign.relax import OPTIMIZERS
    from asebo.extras import missing_optimizer_package

    for label in labels:
        name = label.partition("+")[0]
        if name not in OPTIMIZERS:
            raise SystemExit(f"unknown optimizer {label!r}: choose among {', '.join(OPTIMIZERS)}")
        missing = missing_optimizer_package(name)
        if missing:
            raise SystemExit(missing)


def _check(args):
    check_optimizers(args.optimizers)
    for name in ("starts", "steps", "jobs"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be 1 or more, got {getattr(args, name)}")
    if not args.fmax > 0:
        raise SystemExit(f"--fmax must be > 0, got {args.fmax}")


def system_calculator(calc, system):
    """A fresh calculator of the preset ``calc`` for ``system``: the system's own options
    (:attr:`MaterialSystem.calc_options`) under those written in ``calc``."""
    from calculators import get_calculator, parse_preset

    name, options = parse_preset(calc)
    return get_calculator(name, **{**system.calc_options, **options})


def relax_start(task):
    """One relaxation of a benchmark: ``(row, label, result)``.

    Parameters
    ----------
    task : tuple
        ``(system, start, label, calc, fmax, steps, cell_filter, kappa)``: a
        :class:`MaterialSystem`, the start's index, an optimizer label (``'bo'`` or
        ``'bo+PRIOR'``...), a calculator preset, the arguments of
        :func:`asebo.campaign.relax.relax`, and bo's ``kappa`` (None: its default).

    Returns
    -------
    row : str
        ``'NAME/START'``, START counted from 1.
    label : str
    result : dict
        What :func:`~asebo.campaign.relax.relax` returns without the positions and
        energies, or ``error`` (type and message) and ``calls`` before it; ``refused``
        is True when the error came before any calculator call.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from asebo.campaign.relax import EnergyRecorder, relax

    torch.set_num_threads(1)
    system, start, label, calc, fmax, steps, cell_filter, kappa = task
    row = f"{system.name}/{start + 1}"
    optimizer, _, prior = label.partition("+")
    options = bo_options(kappa=kappa) if optimizer == "bo" else None
    try:
        counter = EnergyRecorder(system_calculator(calc, system))
    except Exception as error:  # e.g. a calculator package that is not installed
        return row, label, _failure(error, 0)
    try:
        result = relax(
            system.start(start),
            optimizer,
            counter,
            fmax,
            steps,
            prior=prior or None,
            cell_filter=cell_filter,
            options=options,
        )
    except Exception as error:  # a failed run is reported, the others go on
        return row, label, _failure(error, counter.ncalls)
    for key in ("positions", "energies", "cell"):
        result.pop(key, None)
    return row, label, result


def _failure(error, calls):
    message = " ".join(f"{type(error).__name__}: {error}".split())
    return {"error": message, "calls": calls, "refused": calls == 0}


def run(args, systems, calc="emt", cell_filter=None):
    """Relax every start of the chosen systems with every optimizer; print the table.

    Parameters
    ----------
    args : argparse.Namespace
        The options of :func:`add_arguments`.
    systems : list of MaterialSystem
        The whole set; ``args.systems`` selects from it.
    calc : str
        Calculator preset (see :func:`calculators.get_calculator`).
    cell_filter : str, optional
        A key of :data:`asebo.campaign.relax.CELL_FILTERS` for cell relaxations.

    Returns
    -------
    str
        The table.
    """
    chosen = select(systems, args.systems)
    if args.list:
        for system in chosen:
            print(f"{system.name:24s} {len(system.atoms):3d} atoms  {system.description}")
        return None
    _check(args)
    rows = [f"{s.name}/{k + 1}" for s in chosen for k in range(args.starts)]
    # the costliest optimizers first, so that the pool ends together
    order = sorted(args.optimizers, key=lambda label: label.partition("+")[0] not in ("bo",))
    kappa = getattr(args, "kappa", None)
    tasks = [
        (system, k, label, calc, args.fmax, args.steps, cell_filter, kappa)
        for label in order
        for system in chosen
        for k in range(args.starts)
    ]
    results = {row: {} for row in rows}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(relax_start, task) for task in tasks]
        for done, future in enumerate(as_completed(futures), 1):
            row, label, result = future.result()
            results[row][label] = result
            print(f"[{done}/{len(tasks)}] {row} {label}: {_cell(result)}", file=sys.stderr)
    text = table(results, list(args.optimizers))
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return text


def _cell(result):
    """The table cell of one run: calls and marks, or ``refused``/``error``."""
    if "error" in result:
        return "refused" if result.get("refused") else "error"
    return f"{result['calls']}{'' if result['converged'] else '*'}"


def _moved(result, runs):
    """``, x Å from the start; the lowest y Å`` for a higher minimum whose runs record
    their distance from the start (RMSD after alignment), else nothing."""
    finished = [r for r in runs.values() if "energy" in r and "rmsd_from_start" in r]
    if "rmsd_from_start" not in result or not finished:
        return ""
    lowest = min(finished, key=lambda r: r["energy"])
    return (
        f", {result['rmsd_from_start']:.2f} Å from the start; the lowest "
        f"{lowest['rmsd_from_start']:.2f} Å"
    )


def table(results, labels, first_column="start"):
    """The markdown table of a benchmark of relaxations.

    Parameters
    ----------
    results : dict
        ``{row: {label: result}}`` as :func:`relax_start` gives them (or a result with
        only ``error`` for a run that failed).
    labels : list of str
        The optimizers, in the order of the columns.
    first_column : str
        The header of the rows' names.

    Returns
    -------
    str
        One row per start with the force calls of each optimizer (``*`` not converged,
        ``^`` final energy more than :data:`HIGHER_MINIMUM` above the lowest from the same
        start), the totals over the runs that ended without error, the converged runs,
        the ratios of the totals to GPMin's, BFGS's and L-BFGS's, the mean time per step outside the
        calculator, where the runs record it (``rmsd_from_start``) the median distance of
        the endpoints from their starts, and the failures and higher minima of each
        optimizer (with the distances from the start of the higher endpoint and the
        lowest one).
    """
    lines = [f"| {first_column} | " + " | ".join(labels) + " |", "|" + "---|" * (len(labels) + 1)]
    totals = dict.fromkeys(labels, 0)
    converged = dict.fromkeys(labels, 0)
    errors = {label: {} for label in labels}
    unconverged = {label: [] for label in labels}
    high = {label: [] for label in labels}
    outside = {label: [] for label in labels}
    moved = {label: [] for label in labels}
    for row, runs in results.items():
        finite = [r["energy"] for r in runs.values() if "energy" in r]
        lowest = min(finite) if finite else np.nan
        cells = []
        for label in labels:
            r = runs[label]
            cell = _cell(r)
            if "error" in r:
                errors[label].setdefault(r["error"], []).append(row)
            else:
                totals[label] += r["calls"]
                converged[label] += r["converged"]
                if not r["converged"]:
                    unconverged[label].append(row)
                if r["energy"] > lowest + HIGHER_MINIMUM:
                    high[label].append(f"{row} (+{r['energy'] - lowest:.3f} eV{_moved(r, runs)})")
                    cell += "^"
                if "rmsd_from_start" in r:
                    moved[label].append(r["rmsd_from_start"])
                outside[label].append(r["seconds_outside"] / max(r["steps"], 1))
            cells.append(cell)
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    ran = {label for label in labels if any("error" not in r[label] for r in results.values())}
    lines.append(
        "| **total** | "
        + " | ".join(str(totals[label]) if label in ran else "-" for label in labels)
        + " |"
    )
    lines.append(
        "| **converged** | "
        + " | ".join(f"{converged[label]}/{len(results)}" for label in labels)
        + " |"
    )
    for reference, name in (("gpmin", "GPMin"), ("bfgs", "BFGS"), ("lbfgs", "L-BFGS")):
        if totals.get(reference):
            ratios = (
                f"{totals[label] / totals[reference]:.2f}" if label in ran else "-"
                for label in labels
            )
            lines.append(f"| **/ {name}** | " + " | ".join(ratios) + " |")
    lines.append(
        "| **s/step outside calc (mean)** | "
        + " | ".join(
            f"{np.mean(outside[label]):.3f}" if outside[label] else "-" for label in labels
        )
        + " |"
    )
    if any(moved.values()):
        lines.append(
            "| **RMSD from the start, Å (median)** | "
            + " | ".join(
                f"{np.median(moved[label]):.2f}" if moved[label] else "-" for label in labels
            )
            + " |"
        )
    lines.append("")
    lines.append(
        "`*` not converged, `^` final energy more than 0.01 eV above the lowest any "
        "optimizer found from the same start; totals and ratios count the runs that "
        "ended without error (`refused`: the optimizer refused the system before any "
        "calculator call)."
    )
    for label in labels:
        for message, rows in errors[label].items():
            where = "every start" if len(rows) == len(results) else ", ".join(rows)
            lines.append(f"- {label} failed on {where}: {message}")
        if unconverged[label]:
            lines.append(f"- {label} not converged: " + ", ".join(unconverged[label]))
        if high[label]:
            lines.append(f"- {label} higher minima: " + "; ".join(high[label]))
    return "\n".join(lines)
