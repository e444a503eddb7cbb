"""Every molecule of the G2 set, rattled: does BOOptimizer converge within 3x L-BFGS's calls?

Each molecule of ``ase.collections.g2`` (162 molecules; L. A. Curtiss, K. Raghavachari,
P. C. Redfern and J. A. Pople, J. Chem. Phys. 106, 1063 (1997)) with two atoms or
more is rattled (``atoms.rattle(--rattle, seed=--seed)``, 0.1 Å by default) and
relaxed to ``--fmax`` with ASE's L-BFGS, then with BOOptimizer given at most
``--limit`` times L-BFGS's calls. Prints a row per molecule (calls of each, their
ratio, the energy difference), the failures (not converged within the limit, an
error, a higher minimum) and the total and median ratios; with ``--audit``, whether
each endpoint is a minimum (:mod:`asebo.benchmarks._endpoint_audit`).
"""

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from asebo.benchmarks._materials import bo_options
from asebo.benchmarks._options import nonnegative_float, positive_float, positive_int
from asebo.benchmarks._relaxation_table import add_symmetry_probe

HIGHER = 0.01  # eV: a final energy this far above L-BFGS's is a different minimum


def add_arguments(parser):
    parser.add_argument(
        "--molecules",
        nargs="+",
        default=None,
        help="G2 names to run (default: all with two atoms or more)",
    )
    parser.add_argument("--calc", default="gfn2", help="calculator preset (default: gfn2)")
    parser.add_argument(
        "--prior",
        default=None,
        help="prior of bo: lindh, max, mean or a calculator preset (default: bo's own)",
    )
    parser.add_argument(
        "--rattle",
        type=nonnegative_float,
        default=0.1,
        help="standard deviation of the random displacements, Å",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_symmetry_probe(parser)  # with --rattle 0 every start keeps G2's symmetry
    parser.add_argument("--fmax", type=positive_float, default=0.05, help="eV/Å")
    parser.add_argument(
        "--limit",
        type=positive_float,
        default=3.0,
        help="bo may take this many times L-BFGS's calls",
    )
    parser.add_argument("--jobs", type=positive_int, default=2)
    parser.add_argument(
        "--audit",
        action="store_true",
        help="also compute the target's finite-difference Hessian at both endpoints "
        "(6n calls each, not counted) and count the saddle points",
    )
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")


def g2_names(wanted=None):
    """Names of the G2 molecules with two atoms or more, or the ``wanted`` ones."""
    from ase.collections import g2

    names = [name for name in g2.names if len(g2[name]) > 1]
    if wanted:
        unknown = sorted(set(wanted) - set(g2.names))
        if unknown:
            raise SystemExit(
                f"not in the G2 set: {', '.join(unknown)}; the names are those "
                "of ase.collections.g2.names"
            )
        names = [name for name in names if name in wanted]
    return names


def rattled(name, rattle, seed):
    """The G2 molecule ``name`` with its positions rattled."""
    from ase.collections import g2

    atoms = g2[name]
    atoms.rattle(rattle, seed=seed)
    return atoms


def compare_one(task):
    """L-BFGS, then bo limited to ``limit`` times its calls, on one rattled molecule.

    Returns
    -------
    name : str
    result : dict
        ``atoms`` (their number), ``lbfgs`` and ``bo`` results of
        :func:`asebo.campaign.relax.relax` (without positions), or ``error``.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from asebo.campaign.relax import relax

    torch.set_num_threads(1)
    name, calc, prior, rattle, seed, fmax, limit, audit, probe = task
    atoms = rattled(name, rattle, seed)
    options = bo_options(probe)
    try:
        reference = relax(atoms, "lbfgs", calc, fmax, steps=1000)
        budget = max(1, int(limit * reference["calls"]))
        # the first call is not a step: budget calls are budget - 1 steps
        bo = relax(atoms, "bo", calc, fmax, steps=budget - 1, prior=prior, options=options)
    except Exception as error:  # noqa: BLE001  reported in the table; the sweep goes on
        return name, {"error": f"{type(error).__name__}: {error}"}
    for result in (reference, bo):
        positions = result.pop("positions")
        if audit:
            from asebo.benchmarks._endpoint_audit import imaginary_modes
            from calculators import get_calculator

            endpoint = atoms.copy()
            endpoint.positions = positions
            result["imaginary"] = imaginary_modes(endpoint, get_calculator(calc))
    return name, {"atoms": len(atoms), "lbfgs": reference, "bo": bo}


def run(args):
    names = g2_names(args.molecules)
    settings = (args.rattle, args.seed, args.fmax, args.limit, args.audit, args.symmetry_probe)
    tasks = [(name, args.calc, args.prior, *settings) for name in names]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(pool.map(compare_one, tasks))
    text = table(results, args.limit)
    if args.audit:
        from asebo.benchmarks._endpoint_audit import audit_section

        runs = {name: result for name, result in results.items() if "error" not in result}
        text = "\n".join([text, *audit_section(runs, ["lbfgs", "bo"])])
    header = (
        f"G2 molecules rattled by {args.rattle} Å (seed {args.seed}), {args.calc}, "
        f"fmax {args.fmax} eV/Å, bo limited to {args.limit:g} x L-BFGS's calls\n\n"
    )
    print(header + text)
    if args.markdown:
        args.markdown.write_text(header + text + "\n")


def table(results, limit):
    """Markdown table of calls per molecule, then failures and summary ratios."""
    lines = [
        "| molecule | atoms | L-BFGS | bo | bo / L-BFGS | E(bo) - E(L-BFGS), eV |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    failures, ratios, totals = [], [], [0, 0]
    for name, result in results.items():
        if "error" in result:
            failures.append(f"{name}: {result['error'][:80]}")
            lines.append(f"| {name} | | | error | | |")
            continue
        reference, bo = result["lbfgs"], result["bo"]
        ratio = bo["calls"] / reference["calls"]
        difference = bo["energy"] - reference["energy"]
        converged = bo["converged"] and ratio <= limit
        if not converged:
            failures.append(
                f"{name}: not converged in {bo['calls']} calls (L-BFGS {reference['calls']})"
            )
        elif difference > HIGHER:
            failures.append(f"{name}: minimum {difference:.3f} eV above L-BFGS's")
        if converged:
            ratios.append(ratio)
            totals[0] += reference["calls"]
            totals[1] += bo["calls"]
        mark = "" if converged else "*"
        lines.append(
            f"| {name} | {result['atoms']} | "
            f"{reference['calls']} | {bo['calls']}{mark} | {ratio:.2f} | "
            f"{difference:+.4f} |"
        )
    lines += [
        "",
        f"`*` not converged within {limit:g} x L-BFGS's calls.",
        "",
        f"- molecules: {len(results)}, failures: {len(failures)}",
    ]
    if ratios:
        lines.append(
            f"- converged: total calls L-BFGS {totals[0]}, bo {totals[1]} "
            f"(ratio {totals[1] / totals[0]:.2f}); median ratio "
            f"{np.median(ratios):.2f}, largest {max(ratios):.2f}"
        )
    lines += [f"- {failure}" for failure in failures]
    return "\n".join(lines)
