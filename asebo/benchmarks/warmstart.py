"""Force calls when BOOptimizer takes over a run another optimizer began (a warm start).

For each molecule of a folder (the drug-like set by default), three relaxations to
``--fmax`` with GFN2-xTB from the same start: ASE's L-BFGS to the end (``lbfgs``),
``BOOptimizer`` from the start (``bo``), and L-BFGS stopped after ``--after`` calls
(10 by default) whose frames ``BOOptimizer`` takes as observations
(``BOOptimizer(atoms, observations=frames)``) and goes on from, counted together
(``lbfgs>bo``: the calls of both); and, to tell what the frames are worth, the same
hand-over without them (``lbfgs>bo cold``: ``BOOptimizer`` from L-BFGS's last
configuration alone). The table is that of ``asebo bench druglike``, with one more
line per hand-over: the calls ``BOOptimizer`` made after taking over.
"""

import os
from concurrent.futures import ProcessPoolExecutor

from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read
from ase.optimize import LBFGS

from asebo.benchmarks import _relaxation_table
from asebo.benchmarks._materials import table

DEFAULT_DIR = _relaxation_table.DATA_DIR / "druglike"
HANDED_OVER = "lbfgs>bo"
COLD = "lbfgs>bo cold"
LABELS = ["bo", "lbfgs", HANDED_OVER, COLD]


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR)
    parser.add_argument(
        "--after", type=int, default=10, help="L-BFGS calls before BOOptimizer takes over"
    )


def handed_over(atoms, calc, after, fmax, steps, warm=True):
    """L-BFGS for ``after`` calls, then BOOptimizer from its frames (``warm``) or from
    its last configuration alone.

    Returns
    -------
    dict
        As :func:`asebo.campaign.relax.relax` (``calls`` of both optimizers, the time
        outside the calculator BOOptimizer's), with ``calls_after``: BOOptimizer's calls
        (0 where L-BFGS converged first).
    """
    from asebo.campaign.relax import EnergyRecorder, relax
    from calculators import get_calculator

    work = atoms.copy()
    work.calc = EnergyRecorder(get_calculator(calc))
    frames = []

    def record():
        frame = work.copy()
        frame.calc = SinglePointCalculator(
            frame,
            energy=work.get_potential_energy(),
            forces=work.get_forces(apply_constraint=False),
        )
        frames.append(frame)

    lbfgs = LBFGS(work, logfile=None)
    lbfgs.attach(record)
    converged = lbfgs.run(fmax=fmax, steps=after - 1)
    result = relax(
        frames[-1],
        "bo",
        calc,
        fmax,
        0 if converged else steps,
        options={"observations": frames} if warm or converged else None,
    )  # converged: the last frame, taken without a call, ends both
    result["calls_after"] = result["calls"]
    result["calls"] += work.calc.ncalls
    result["energies"] = work.calc.energies + result["energies"]
    return result


def _run_one(task):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from asebo.campaign.relax import relax

    torch.set_num_threads(1)
    path, label, calc, after, fmax, steps = task
    atoms = read(path)
    try:
        if label in (HANDED_OVER, COLD):
            result = handed_over(atoms, calc, after, fmax, steps, warm=label == HANDED_OVER)
        else:
            result = relax(atoms, label, calc, fmax, steps)
    except Exception as error:  # a failed run is reported, the others go on
        return path.stem, label, {"error": f"{type(error).__name__}: {error}"}
    result.pop("positions")
    return path.stem, label, result


def run(args):
    """Run the three relaxations of every molecule and print the table."""
    if args.after < 1:
        raise SystemExit("--after must be 1 or more L-BFGS calls")
    files = _relaxation_table.molecule_files(args.dir, args.molecules)
    tasks = [
        (f, label, args.calc, args.after, args.fmax, args.steps) for f in files for label in LABELS
    ]
    results = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for stem, label, result in pool.map(_run_one, tasks):
            results.setdefault(stem, {})[label] = result
    text = table(results, LABELS, first_column="molecule")
    for label in (HANDED_OVER, COLD):
        after = [r[label].get("calls_after") for r in results.values()]
        if None not in after:
            before = sum(r[label]["calls"] for r in results.values()) - sum(after)
            text += (
                f"\n\n{label}: {before} L-BFGS calls (at most {args.after} per molecule) "
                f"and {sum(after)} BOOptimizer calls after taking over."
            )
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
