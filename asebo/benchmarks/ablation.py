"""Each special-case rule of BOOptimizer turned off alone, over molecule and periodic sets.

The rules are the repairs of a step (the searches repeated after a refused step, the
overturned-curvature correction, the steps along the forces, the rigid move...) and the
checks at converged forces (curvature steps, the model's quadratic...);
``docs/notes/ablation-rules.md`` lists them and where each lives. Each variant is
BOOptimizer with every rule on (``all on``) or with one rule off: a switch of
:class:`asebo.optimize.settings.Rules`, or the setting that already turns that rule off
(``pessimistic_kappa``: ``SearchSettings(kappa=0.1)``; ``rigid_shrink``:
``SpecialCases(rigid_shrink=1.0)``; ``curvature_steps``:
``SpecialCases(curvature_steps=0)``; ``quadratic_drop``:
``SpecialCases(quadratic_drop=None)``). Every variant relaxes every molecule of the
molecule sets (``--calc``, GFN2-xTB by default) and every start of the periodic sets
(EMT, as ``asebo bench surfaces``, ``bulk`` and ``cells`` build them) to ``--fmax``,
side by side in one run. One markdown table gives, per rule and set, the force calls
(and their difference to ``all on``), the runs whose path differs from ``all on``'s, the
endpoints more than 0.01 eV above the lowest any variant found from the same start, the
saddle points (by the model's own verdict at convergence; with ``--audit``, by the
target's finite-difference Hessian on the molecule sets) and the runs that did not
converge.
"""

import json
import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from asebo.benchmarks._materials import HIGHER_MINIMUM
from asebo.benchmarks._options import positive_float, positive_int
from asebo.benchmarks._relaxation_table import DATA_DIR

ALL_ON = "all on"
"""The variant with every rule on: BOOptimizer's defaults."""

STEP_RULES = (
    "latest_start",
    "prior_failure_retry",
    "uncertain_retry",
    "slope_noise_box",
    "overturned_curvature",
    "interpolated_modes",
    "segment_restart",
    "line_start",
    "pessimistic_kappa",
    "force_step_halving",
    "newton_force_step",
    "force_step_radius",
    "rigid_move",
    "rigid_shrink",
)
"""The rules of a step that turn off alone, in the order of the table."""

CONVERGENCE_RULES = (
    "curvature_steps",
    "curvature_evidence",
    "quadratic_drop",
    "quadratic_patience",
)
"""The rules at converged forces that turn off alone (the symmetry probe is off by
default), in the order of the table."""

RULES = STEP_RULES + CONVERGENCE_RULES

SETTING_SWITCHES = {
    "pessimistic_kappa": ("search", "kappa", 0.1),
    "rigid_shrink": ("special_cases", "rigid_shrink", 1.0),
    "curvature_steps": ("special_cases", "curvature_steps", 0),
    "quadratic_drop": ("special_cases", "quadratic_drop", None),
}
"""The rules an existing setting turns off: BOOptimizer's argument, the field and its
value."""

MOLECULE_SETS = (
    "baker",
    "rough",
    "s22",
    "druglike",
    "druglike2",
    "druglike3",
    "large",
    "large-heldout",
)
"""The molecule sets: folders of xyz files shipped in ``asebo/data``, and the 36 large
molecules outside them (:mod:`asebo.benchmarks._large_heldout`, written on first use
to ``HELDOUT_DIR``)."""

HELDOUT_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "asebo"
"""Where the held-out large molecules are written: ``large-heldout/`` below it."""

PERIODIC_SETS = ("bulk", "surfaces", "cells", "periodic-heldout")
"""The periodic sets, with EMT: their systems as their own benchmarks build them."""

SETS = MOLECULE_SETS + PERIODIC_SETS

DEFAULT_SETS = ["baker", "bulk"]

SADDLE_VERDICT = "a saddle point by the model"
"""How the model's verdict at convergence names a saddle point
(:meth:`asebo.optimize.model_hessian.ModelCurvature.summary`)."""


def add_arguments(parser):
    parser.add_argument(
        "--sets",
        nargs="+",
        default=DEFAULT_SETS,
        choices=SETS,
        metavar="SET",
        help=f"molecule sets ({', '.join(MOLECULE_SETS)}) and periodic sets with EMT "
        f"({', '.join(PERIODIC_SETS)}) (default: {' '.join(DEFAULT_SETS)})",
    )
    parser.add_argument(
        "--rules",
        nargs="*",
        default=list(RULES),
        choices=RULES,
        metavar="RULE",
        help="the rules to turn off, each alone, beside 'all on' (default: every one; "
        "none: 'all on' alone, whose reasons and repeated searches show which rules "
        "fire): " + ", ".join(RULES),
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help="file stems or system names (substrings) to run within the sets (default: all)",
    )
    parser.add_argument(
        "--calc", default="gfn2", help="calculator preset of the molecule sets (default: gfn2)"
    )
    parser.add_argument(
        "--prior",
        default=None,
        metavar="CALC",
        help="a calculator preset as the GP's prior mean on the molecule sets, as "
        "BOOptimizer(prior=calculator) (default: none, the Lindh prior)",
    )
    parser.add_argument("--starts", type=int, default=2, help="starts per periodic system")
    parser.add_argument("--fmax", type=positive_float, default=0.05)
    parser.add_argument("--steps", type=positive_int, default=300)
    parser.add_argument("--jobs", type=positive_int, default=1)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every run's figures here"
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="count the saddle points of the molecule sets by the target's "
        "finite-difference Hessian at each distinct endpoint (6n calls each, not "
        "counted) instead of the model's verdict",
    )


def variant_options(variant):
    """BOOptimizer's keyword arguments of ``variant``: :data:`ALL_ON` or a rule of
    :data:`RULES` turned off alone."""
    from asebo.optimize.settings import Rules, SearchSettings, SpecialCases

    if variant == ALL_ON:
        return {}
    if variant in SETTING_SWITCHES:
        argument, name, value = SETTING_SWITCHES[variant]
        settings = {"search": SearchSettings, "special_cases": SpecialCases}[argument]
        return {argument: settings(**{name: value})}
    return {"rules": Rules(**{variant: False})}


def set_rows(name, wanted, starts):
    """The runs of set ``name``: ``(row, source)`` pairs, a row per molecule or start.

    A molecule's source is its xyz file; a periodic start's is ``(system, index)``
    (:class:`asebo.benchmarks._materials.MaterialSystem`).
    """
    from asebo.benchmarks._materials import select

    if name in MOLECULE_SETS:
        from asebo.benchmarks._relaxation_table import molecule_files

        folder = DATA_DIR / name
        if name == "large-heldout":
            from asebo.benchmarks._large_heldout import write_large_heldout

            folder = HELDOUT_DIR / name
            write_large_heldout(folder)
        return [(path.stem, path) for path in molecule_files(folder, wanted)]
    systems = select(_periodic_systems(name), wanted)
    return [(f"{s.name}/{k + 1}", (s, k)) for s in systems for k in range(starts)]


def _periodic_systems(name):
    if name == "bulk":
        from asebo.benchmarks.bulk import bulk_systems

        return bulk_systems()
    if name == "surfaces":
        from asebo.benchmarks.surfaces import surface_systems

        return surface_systems()
    if name == "periodic-heldout":
        from asebo.benchmarks._heldout import periodic_heldout_systems

        return periodic_heldout_systems()
    from asebo.benchmarks.cells import emt_cells

    return emt_cells()


def run_variant(task):
    """One relaxation: ``(set, row, variant, result)``.

    Parameters
    ----------
    task : tuple
        ``(set, row, source, variant, calc, prior, fmax, steps)``, as :func:`set_rows`
        and :func:`variant_options` take them; ``prior`` a calculator preset or None.

    Returns
    -------
    tuple
        ``result`` holds ``calls``, ``converged``, ``energy``, ``energies`` (of every
        call), ``verdict`` (the model's at convergence, or None), ``reasons`` and
        ``retried`` (counts of the proposals' reasons and of why searches were
        repeated) and ``positions`` (the endpoint's, a list); or ``error`` (type and
        message) and ``calls``.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    from ase.io import read

    from asebo.benchmarks._materials import system_calculator
    from asebo.campaign.relax import CELL_FILTERS, EnergyRecorder
    from asebo.optimize.optimizer import BOOptimizer
    from calculators import get_calculator

    torch.set_num_threads(1)
    set_name, row, source, variant, calc, prior, fmax, steps = task
    options = variant_options(variant)
    if set_name in MOLECULE_SETS:
        atoms, counter = read(source), EnergyRecorder(get_calculator(calc))
        if prior is not None:
            options["prior"] = get_calculator(prior)
    else:
        system, start = source
        atoms, counter = system.start(start), EnergyRecorder(system_calculator("emt", system))
    atoms.calc = counter
    system = CELL_FILTERS["frechet"](atoms) if set_name == "cells" else atoms
    try:
        optimizer = BOOptimizer(system, logfile=None, **options)
        converged = bool(optimizer.run(fmax=fmax, steps=steps))
    except Exception as error:  # a failed run is reported, the others go on
        message = " ".join(f"{type(error).__name__}: {error}".split())
        return set_name, row, variant, {"error": message, "calls": counter.ncalls}
    reasons, retried = {}, {}
    for proposal in optimizer.proposals:
        reasons[proposal["reason"]] = reasons.get(proposal["reason"], 0) + 1
        for why in proposal["retried"]:
            retried[why] = retried.get(why, 0) + 1
    result = {
        "calls": counter.ncalls,
        "converged": converged,
        "energy": float(atoms.get_potential_energy()),
        "energies": counter.energies,
        "verdict": optimizer.curvature_verdict,
        "reasons": reasons,
        "retried": retried,
        "positions": atoms.get_positions().tolist(),
    }
    return set_name, row, variant, result


def audit_endpoint(task):
    """``(key, imaginary)``: the imaginary frequencies (cm⁻¹) of the target's
    finite-difference Hessian at a molecule's endpoint; ``task`` is ``(key, path,
    positions, calc)``."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from ase.io import read

    from asebo.benchmarks._endpoint_audit import imaginary_modes
    from calculators import get_calculator

    key, path, positions, calc = task
    atoms = read(path)
    atoms.positions = np.asarray(positions)
    return key, imaginary_modes(atoms, get_calculator(calc))


def _check(args):
    for name in ("starts", "steps", "jobs"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be 1 or more, got {getattr(args, name)}")
    if not args.fmax > 0:
        raise SystemExit(f"--fmax must be > 0, got {args.fmax}")


def run(args):
    """Relax every run of the chosen sets with every variant; print the table, and
    write it to ``--markdown`` and every run's figures to ``--json`` where given."""
    _check(args)
    variants = [ALL_ON, *dict.fromkeys(args.rules)]
    rows = {name: set_rows(name, args.only, args.starts) for name in args.sets}
    tasks = [
        (name, row, source, variant, args.calc, args.prior, args.fmax, args.steps)
        for variant in variants
        for name in args.sets
        for row, source in rows[name]
    ]
    results = {name: {row: {} for row, _ in rows[name]} for name in args.sets}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_variant, task) for task in tasks]
        for done, future in enumerate(as_completed(futures), 1):
            name, row, variant, result = future.result()
            results[name][row][variant] = result
            cell = "error" if "error" in result else result["calls"]
            print(f"[{done}/{len(tasks)}] {name} {row} {variant}: {cell}", file=sys.stderr)
        if args.audit:
            _audit(pool, args, rows, results)
    text = "\n".join([_command_line(args), "", table(results, variants, args.audit)])
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


def _audit(pool, args, rows, results):
    """Put ``imaginary`` into every molecule's result: the target's imaginary modes at
    its endpoint, each distinct endpoint audited once."""
    tasks, keys = {}, {}
    for name in args.sets:
        if name not in MOLECULE_SETS:
            continue
        for row, path in rows[name]:
            for variant, result in results[name][row].items():
                if "positions" not in result:
                    continue
                key = (name, row, np.asarray(result["positions"]).tobytes().hex())
                tasks.setdefault(key, (key, path, result["positions"], args.calc))
                keys[name, row, variant] = key
    found = dict(pool.map(audit_endpoint, tasks.values()))
    for (name, row, variant), key in keys.items():
        results[name][row][variant]["imaginary"] = found[key]


def _command_line(args):
    """The command that runs this table again, as a markdown line."""
    words = ["asebo", "bench", "ablation", "--sets", *args.sets]
    if list(args.rules) != list(RULES):
        words += ["--rules", *args.rules]
    if args.only:
        words += ["--only", *args.only]
    options = (("calc", "gfn2"), ("prior", None), ("starts", 2), ("fmax", 0.05), ("steps", 300))
    for option, default in options:
        if getattr(args, option) != default:
            words += [f"--{option}", str(getattr(args, option))]
    if args.audit:
        words.append("--audit")
    return f"Regenerated by `{shlex.join(words)}`."


def table(results, variants, audited=False):
    """The markdown table of an ablation.

    Parameters
    ----------
    results : dict
        ``{set: {row: {variant: result}}}`` as :func:`run_variant` gives them, with
        ``imaginary`` in the molecules' results where audited.
    variants : list of str
        :data:`ALL_ON` first, then the rules turned off, in the order of the rows.
    audited : bool
        Whether the molecule sets' saddle points are the target's (``imaginary``).

    Returns
    -------
    str
        One row per variant and, per set, five columns: the force calls of the runs
        that ended without error (and their difference to ``all on``'s over the same
        runs), the runs whose calls differ from ``all on``'s in number or energy, the
        endpoints more than :data:`asebo.benchmarks._materials.HIGHER_MINIMUM` eV above
        the lowest any variant found in that run, the saddle points, and the runs not
        converged or failed. Below it, ``all on``'s runs of each kind, then for each
        rule turned off the runs that became of that kind and those that no longer are.
    """
    sets = list(results)
    header = ["rule off"]
    for name in sets:
        count = len(results[name])
        header += [f"{name} ({count}) calls (Δ)", "changed", "higher", "saddles", "unconv."]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    listed = []
    for variant in variants:
        cells = [variant]
        for name in sets:
            figures, marks = _set_figures(results[name], variant, audited)
            cells += figures
            reference = _set_figures(results[name], ALL_ON, audited)[1]
            listed += _changes(f"{variant}, {name}", marks, reference, variant == ALL_ON)
        lines.append("| " + " | ".join(cells) + " |")
    saddles = (
        "by the target's finite-difference Hessian (a mode above 50i cm⁻¹) on the "
        "molecule sets, by the model's verdict at convergence on the periodic ones"
        if audited
        else "by the model's verdict at convergence (none under a cell filter)"
    )
    lines += [
        "",
        "Calls: the force calls of the runs that ended without error, Δ against `all on` "
        "over the runs both ended; changed: runs whose calls differ from `all on`'s in "
        f"number or energy; higher: endpoints more than {HIGHER_MINIMUM} eV above the "
        f"lowest any variant found from the same start; saddles: {saddles}; unconv.: "
        "runs not converged within the steps, or failed. Below: `all on`'s runs of each "
        "kind, then for each rule off the runs that became of that kind (`also`) and "
        "those that no longer are (`no longer`).",
    ]
    if listed:
        lines += ["", *listed]
    return "\n".join(lines)


def _set_figures(runs, variant, audited):
    """The five cells of ``variant`` on one set's ``runs`` ({row: {variant: result}}),
    and its runs of each kind: ``{kind: {row: detail}}``."""
    calls = difference = changed = 0
    marks = {kind: {} for kind in ("higher", "saddles", "not converged", "failed")}
    for row, by_variant in runs.items():
        result, reference = by_variant[variant], by_variant[ALL_ON]
        if "error" in result:
            marks["failed"][row] = f" ({result['error']})"
            continue
        calls += result["calls"]
        if "error" not in reference:
            difference += result["calls"] - reference["calls"]
            changed += result["energies"] != reference["energies"]
        lowest = min(r["energy"] for r in by_variant.values() if "energy" in r)
        if result["energy"] > lowest + HIGHER_MINIMUM:
            marks["higher"][row] = f" (+{result['energy'] - lowest:.3f} eV)"
        saddle = (
            bool(result["imaginary"])
            if audited and "imaginary" in result
            else SADDLE_VERDICT in (result["verdict"] or "")
        )
        if saddle:
            marks["saddles"][row] = ""
        if not result["converged"]:
            marks["not converged"][row] = ""
    unconverged = len(marks["not converged"]) + len(marks["failed"])
    delta = "" if variant == ALL_ON else f" ({difference:+d})"
    cells = [f"{calls}{delta}", "-" if variant == ALL_ON else str(changed)]
    cells += [str(len(marks["higher"])), str(len(marks["saddles"])), str(unconverged)]
    return cells, marks


def _changes(label, marks, reference, whole):
    """Lines that name the runs of each kind of ``marks`` ({kind: {row: detail}}): all
    of them where ``whole``, else those not of that kind in ``reference`` (``also``)
    and those of ``reference`` that ``marks`` no longer holds (``no longer``)."""
    lines = []
    for kind, rows in marks.items():
        if whole or kind == "failed":
            named = [f"{row}{detail}" for row, detail in rows.items()]
            if named:
                lines.append(f"- {label} {kind}: {', '.join(named)}")
            continue
        joined = [f"{row}{detail}" for row, detail in rows.items() if row not in reference[kind]]
        left = [row for row in reference[kind] if row not in rows]
        parts = [f"also {', '.join(joined)}"] if joined else []
        parts += [f"no longer {', '.join(left)}"] if left else []
        if parts:
            lines.append(f"- {label} {kind}: {'; '.join(parts)}")
    return lines
