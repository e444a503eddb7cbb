"""Tight convergence: force calls, convergence and endpoints at fmax 1e-3 and 1e-4 eV/Å.

Relaxes water, ethanol and benzene (:func:`ase.build.molecule`, rattled by
``--rattle`` Å with the fixed ``--seed``), or with ``--set baker`` the 30 Baker
molecules as shipped (``asebo/data/baker``), with GFN2-xTB to each ``--fmax`` (a
frequency calculation's thresholds), with ``bo``, ASE's BFGS and Sella in internal
coordinates (:func:`asebo.campaign.relax.relax`), side by side in one run. Prints one
row per molecule, threshold and optimizer: the force calls, whether it converged,
the largest force at the end, and the final energy above the lowest any optimizer
reached for that molecule and threshold (meV); then, per threshold and optimizer, the
runs converged, their calls and the largest of those energies. A run that raises is a
row that says so, with its calls before the error; the others go on.
"""

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from ase.build import molecule

from asebo.benchmarks._materials import check_optimizers
from asebo.benchmarks._options import nonnegative_float, positive_float, positive_int

MOLECULES = {"water": "H2O", "ethanol": "CH3CH2OH", "benzene": "C6H6"}
"""The small set: names and their :func:`ase.build.molecule` formulas."""
OPTIMIZERS = ["bo", "bfgs", "sella"]
THRESHOLDS = [1e-3, 1e-4]


def add_arguments(parser):
    parser.add_argument(
        "--set",
        choices=["small", "baker"],
        default="small",
        help="small: water, ethanol, benzene; baker: the 30 Baker molecules",
    )
    parser.add_argument(
        "--molecules",
        nargs="+",
        default=None,
        help="names (small set) or file stems and substrings (Baker) to run (default: all)",
    )
    parser.add_argument("--fmax", type=positive_float, nargs="+", default=THRESHOLDS, help="eV/Å")
    parser.add_argument(
        "--optimizers",
        nargs="+",
        default=OPTIMIZERS,
        help="bo, bfgs, lbfgs, fire, gpmin, sella (pip install 'asebo[sella]'), ...",
    )
    parser.add_argument(
        "--rattle", type=nonnegative_float, default=0.05, help="Å, the small set's starts"
    )
    parser.add_argument("--seed", type=int, default=0, help="of the small set's rattle")
    parser.add_argument("--calc", default="gfn2")
    parser.add_argument("--steps", type=positive_int, default=1000)
    parser.add_argument("--jobs", type=positive_int, default=1)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables here")


def small_set(names=None, rattle=0.05, seed=0):
    """``{name: atoms}`` of :data:`MOLECULES` (those in ``names``; all: None), each
    rattled by ``rattle`` Å with ``seed``."""
    unknown = sorted(set(names or ()) - set(MOLECULES))
    if unknown:
        raise SystemExit(
            f"unknown molecule {', '.join(unknown)}: choose among {', '.join(MOLECULES)}, "
            "or --set baker"
        )
    starts = {}
    for name in names or MOLECULES:
        atoms = molecule(MOLECULES[name])
        atoms.rattle(rattle, seed=seed)
        starts[name] = atoms
    return starts


def baker_set(wanted=None):
    """``{stem: atoms}`` of the shipped Baker molecules whose stems contain one of
    ``wanted`` (all: None)."""
    from ase.io import read

    from asebo.benchmarks._relaxation_table import molecule_files
    from asebo.benchmarks.baker import DEFAULT_DIR

    return {path.stem: read(path) for path in molecule_files(DEFAULT_DIR, wanted)}


def relax_tight(task):
    """One relaxation: ``(name, fmax, optimizer, result)``.

    Parameters
    ----------
    task : tuple
        ``(name, atoms, optimizer, fmax, calc, steps)``.

    Returns
    -------
    tuple
        ``result`` holds ``calls``, ``converged``, ``fmax`` (at the end) and ``energy``
        of :func:`asebo.campaign.relax.relax`, or ``error`` (type and message, one
        line) and the ``calls`` made before it.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the calculator's, beside other jobs
    from asebo.campaign.relax import EnergyRecorder, relax
    from calculators import get_calculator

    name, atoms, optimizer, fmax, calc, steps = task
    counter = EnergyRecorder(get_calculator(calc) if isinstance(calc, str) else calc)
    try:
        result = relax(atoms, optimizer, counter, fmax, steps)
    except Exception as error:  # a failed run is a row of the table, the others go on
        message = " ".join(f"{type(error).__name__}: {error}".split())
        return name, fmax, optimizer, {"error": message, "calls": counter.ncalls}
    kept = {key: result[key] for key in ("calls", "converged", "fmax", "energy")}
    return name, fmax, optimizer, kept


def table(results, optimizers):
    """The markdown tables of the runs.

    Parameters
    ----------
    results : dict
        ``{(name, fmax): {optimizer: result}}`` of :func:`relax_tight`.
    optimizers : list of str
        In the order of the rows.

    Returns
    -------
    str
        One row per molecule, threshold and optimizer (calls, converged, the final
        largest force, the final energy above the lowest of that molecule and
        threshold in meV; ``failed`` and the error for a run that raised), then one
        per threshold and optimizer (runs converged, their calls, the largest energy
        above the lowest among them).
    """
    lines = [
        "| molecule | fmax, eV/Å | optimizer | calls | converged | final fmax, eV/Å "
        "| E − lowest, meV |",
        "|---|---|---|---|---|---|---|",
    ]
    above = {}  # (fmax, optimizer): [(meV above the lowest, calls)] of the converged runs
    for (name, fmax), runs in results.items():
        lowest = min((r["energy"] for r in runs.values() if "energy" in r), default=np.nan)
        for optimizer in optimizers:
            lines.append(f"| {name} | {fmax:g} | {optimizer} | " + _cells(runs[optimizer], lowest))
            result = runs[optimizer]
            if result.get("converged"):
                meV = 1000 * (result["energy"] - lowest)
                above.setdefault((fmax, optimizer), []).append((meV, result["calls"]))
    thresholds = sorted({fmax for _, fmax in results}, reverse=True)
    lines += [
        "",
        "| fmax, eV/Å | optimizer | converged | calls of those | largest E − lowest, meV |",
    ]
    lines.append("|---|---|---|---|---|")
    for fmax in thresholds:
        runs = sum(1 for _, threshold in results if threshold == fmax)
        for optimizer in optimizers:
            done = above.get((fmax, optimizer), [])
            worst = f"{max(m for m, _ in done):.3f}" if done else "-"
            calls = sum(c for _, c in done)
            lines.append(f"| {fmax:g} | {optimizer} | {len(done)}/{runs} | {calls} | {worst} |")
    return "\n".join(lines)


def _cells(result, lowest):
    """The calls, converged, final fmax and energy cells of one run's row."""
    if "error" in result:
        return f"{result['calls']} | failed: {result['error']} | - | - |"
    converged = "yes" if result["converged"] else "no"
    meV = 1000 * (result["energy"] - lowest)
    return f"{result['calls']} | {converged} | {result['fmax']:.2g} | {meV:.3f} |"


def run(args):
    """Relax every molecule to every threshold with every optimizer; print the tables."""
    check_optimizers(args.optimizers)
    if not all(np.isfinite(f) and f > 0 for f in args.fmax):
        raise SystemExit(f"--fmax must be forces > 0 in eV/Å, got {' '.join(map(str, args.fmax))}")
    if args.jobs < 1 or args.steps < 1:
        raise SystemExit("--jobs and --steps must be 1 or more")
    if args.set == "baker":
        starts = baker_set(args.molecules)
    else:
        starts = small_set(args.molecules, args.rattle, args.seed)
    tasks = [
        (name, atoms, optimizer, fmax, args.calc, args.steps)
        for fmax in args.fmax
        for name, atoms in starts.items()
        for optimizer in args.optimizers
    ]
    results = {(name, fmax): {} for fmax in args.fmax for name in starts}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for name, fmax, optimizer, result in pool.map(relax_tight, tasks):
            results[(name, fmax)][optimizer] = result
    text = table(results, args.optimizers)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
