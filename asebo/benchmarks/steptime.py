"""Processor time and memory of BOOptimizer steps outside the calculator, against observations.

Relaxes one molecule (default: Baker's menthone, 29 atoms; ``--smiles`` builds any
other with RDKit, e.g. ``--smiles CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC`` for the 98-atom
alkane C32H66) with GFN2-xTB and a force threshold it cannot reach, so that the run
goes on to the largest of ``--observations`` plus half of ``--window`` calls, and
measures after every step the processor time the step took outside the calculator:
the GP fit with its marginal likelihood and the LCB minimisation. The optimizer runs
with its own threads (one, or ``OMP_NUM_THREADS`` where set; ``--threads`` gives
another count, :func:`asebo.threads.optimizer_threads`). Processor time, which does
not depend on the load of a shared machine, and wall time, which shows what threads
waiting on one another cost. Prints, for each value of ``--observations``, the time
per step over the window centred on it, and the peak resident memory of the process
(which includes the roughly 0.3 GB of the loaded libraries).

With ``--fmax`` the run is a relaxation as a user runs it instead: to that force
threshold (at most ``--steps`` steps), and the table gives the time per step averaged
over the whole run, first steps included, and over its first ten steps.

``--prior`` (a calculator preset, ``gfn1`` say) relaxes on that prior calculator: the
time outside the calculator then includes the prior's calls, and the tables also give
the prior's calls per step and the wall seconds they took.
"""

import json
import os
import resource
import time

import numpy as np
from ase.io import read

from asebo.benchmarks._options import positive_float, positive_int
from asebo.benchmarks.baker import DEFAULT_DIR


def add_arguments(parser):
    parser.add_argument(
        "--molecule", default=str(DEFAULT_DIR / "29_menthone.xyz"), help="structure file"
    )
    parser.add_argument(
        "--smiles", default=None, help="build the molecule from this SMILES string instead (RDKit)"
    )
    parser.add_argument(
        "--observations",
        type=int,
        nargs="+",
        default=[50],
        help="observations at the centres of the measured windows",
    )
    parser.add_argument(
        "--window", type=int, default=10, help="steps measured around each --observations"
    )
    parser.add_argument("--calc", default="gfn2")
    parser.add_argument(
        "--prior",
        default=None,
        metavar="CALC",
        help="a calculator preset as BOOptimizer's prior (default: its default prior)",
    )
    parser.add_argument(
        "--fmax",
        type=positive_float,
        default=None,
        help="relax to this force threshold and average over the whole run instead",
    )
    parser.add_argument("--steps", type=positive_int, default=300, help="most steps with --fmax")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of the optimizer's own work (default: the optimizer's, OMP_NUM_THREADS "
        "where set, else 1)",
    )
    parser.add_argument(
        "--json",
        default=None,
        help="also write every step's time and peak memory to this file "
        "(examples/plot_steptime.py draws them)",
    )


def step_times(atoms, calc, steps, marks=None, fmax=1e-8, threads=None, prior=None):
    """Processor seconds outside the calculator of each BOOptimizer step of a run.

    Parameters
    ----------
    atoms : ase.Atoms
        The start (a copy is relaxed).
    calc : str or ase calculator
        Calculator preset, or a calculator.
    steps : int
        Steps to run: all of them at the default ``fmax``, which no run reaches.
    marks : list, optional
        Receives ``(processor time, calculator processor time, peak resident bytes,
        wall time, calculator wall time, prior calls, prior wall time)`` after every
        step and after the run.
    fmax : float
        Force threshold of the run, eV/Å.
    threads : int, optional
        The optimizer's ``threads`` (None: its default).
    prior : str or ase calculator, optional
        A calculator preset or calculator as the optimizer's prior, its calls counted
        (None: the optimizer's default prior, uncounted).

    Returns
    -------
    ndarray of shape (steps taken,)
        Entry ``i`` is the step that follows observation ``i + 1`` with the
        convergence test after it (the checks at convergence included): the last
        step's test is the run's last.
    """
    from asebo import BOOptimizer
    from calculators import CountingCalculator, get_calculator

    work = atoms.copy()
    counter = CountingCalculator(get_calculator(calc) if isinstance(calc, str) else calc)
    work.calc = counter
    marks = [] if marks is None else marks
    prior_counter = None
    if prior is not None:
        calculator = get_calculator(prior) if isinstance(prior, str) else prior
        prior_counter = CountingCalculator(calculator)
    options = {} if prior_counter is None else {"prior": prior_counter}
    optimizer = BOOptimizer(work, logfile=None, threads=threads, **options)

    def mark():
        marks.append(
            (
                time.process_time(),
                counter.cpu_time,
                peak_resident_bytes(),
                time.perf_counter(),
                counter.wall_time,
                0 if prior_counter is None else prior_counter.ncalls,
                0.0 if prior_counter is None else prior_counter.wall_time,
            )
        )

    optimizer.attach(mark)
    optimizer.run(fmax=fmax, steps=steps)
    mark()  # the last convergence test, its checks at convergence with it
    return _per_step([m[0] for m in marks]) - _per_step([m[1] for m in marks])


def _per_step(values):
    """The rise of ``values`` (a mark after every step and one after the run) over each
    step, the last step's with the run's last convergence test."""
    rises = np.diff(np.asarray(values, dtype=np.float64))
    if len(rises) > 1:
        rises[-2] += rises[-1]
        rises = rises[:-1]
    return rises


def wall_times(marks):
    """Wall seconds outside the calculator of each step, from the ``marks`` of
    :func:`step_times` (entry ``i``: the step that follows observation ``i + 1``)."""
    return _per_step([m[3] for m in marks]) - _per_step([m[4] for m in marks])


def prior_per_step(marks):
    """The prior's calls (steps,) and wall seconds (steps,) of each step, from the
    ``marks`` of :func:`step_times`."""
    return _per_step([m[5] for m in marks]), _per_step([m[6] for m in marks])


def _threads_label(threads):
    from asebo.threads import optimizer_threads

    count = optimizer_threads(threads)
    return f"{count} thread{'s' if count > 1 else ''}{'' if threads else ' (default)'}"


def peak_resident_bytes():
    """Peak resident memory of this process so far, bytes (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _structure(args):
    if args.smiles is None:
        return read(args.molecule), os.path.basename(args.molecule)
    from asebo.smiles import molecule_from_smiles

    return molecule_from_smiles(args.smiles), args.smiles


def run(args):
    if args.threads is not None and args.threads < 1:
        raise SystemExit(f"--threads must be 1 or more, got {args.threads}")
    atoms, name = _structure(args)
    if args.fmax is not None:
        _whole_run(atoms, name, args)
        return
    firsts = [max(1, centre - args.window // 2) for centre in sorted(args.observations)]
    windows = [(first, first + args.window) for first in firsts]
    marks = []
    times = step_times(
        atoms, args.calc, windows[-1][1], marks, threads=args.threads, prior=args.prior
    )
    walls = wall_times(marks)
    peaks = np.array([m[2] for m in marks[:-1]]) / 2**30  # GiB after each step
    if args.json:
        with open(args.json, "w") as fd:
            json.dump(
                {
                    "molecule": name,
                    "atoms": len(atoms),
                    "calc": args.calc,
                    "observations": list(range(1, len(times) + 1)),
                    "seconds": times.tolist(),
                    "wall_seconds": walls.tolist(),
                    "peak_gib": peaks[1:].tolist(),
                },
                fd,
            )
    calls, seconds = prior_per_step(marks)
    label = "" if args.prior is None else f", prior {args.prior}"
    print(f"{name}: {len(atoms)} atoms, {args.calc}{label}, {_threads_label(args.threads)}")
    prior = args.prior is not None
    print(
        "| observations | s per step outside the calculator (mean, median, max) "
        "| wall s per step (mean, median) | peak resident memory, GiB |"
        + (" prior calls per step (mean) | prior wall s per step (mean) |" if prior else "")
    )
    print("|---|---|---|---|" + ("---|---|" if prior else ""))
    for first, last in windows:
        window, wall = times[first - 1 : last - 1], walls[first - 1 : last - 1]
        part = slice(first - 1, last - 1)
        print(
            f"| {first}-{last - 1} | {window.mean():.3f}, {np.median(window):.3f}, "
            f"{window.max():.3f} | {wall.mean():.3f}, {np.median(wall):.3f} "
            f"| {peaks[last - 1]:.2f} |"
            + (f" {calls[part].mean():.1f} | {seconds[part].mean():.3f} |" if prior else "")
        )


def _whole_run(atoms, name, args):
    """Relax ``atoms`` to ``args.fmax`` and print the time per step over the run."""
    marks = []
    times = step_times(
        atoms, args.calc, args.steps, marks, fmax=args.fmax, threads=args.threads, prior=args.prior
    )
    walls = wall_times(marks)
    peak = max(m[2] for m in marks) / 2**30
    if args.json:
        with open(args.json, "w") as fd:
            json.dump(
                {
                    "molecule": name,
                    "atoms": len(atoms),
                    "seconds": times.tolist(),
                    "wall_seconds": walls.tolist(),
                },
                fd,
            )
    threads = _threads_label(args.threads)
    calls, seconds = prior_per_step(marks)
    prior = args.prior is not None
    label = f", prior {args.prior}" if prior else ""
    print(f"{name}: {len(atoms)} atoms, {args.calc}{label}, {threads}, fmax {args.fmax:g}")
    print(
        "| atoms | calls | s per step outside the calculator, whole run (mean, max) "
        "| first 10 steps (mean) | wall s per step (mean) | peak resident memory, GiB |"
        + (" prior calls per step (mean) | prior wall s per step (mean) |" if prior else "")
    )
    print("|---|---|---|---|---|---|" + ("---|---|" if prior else ""))
    print(
        f"| {len(atoms)} | {len(times) + 1} | {times.mean():.3f}, {times.max():.3f} "
        f"| {times[:10].mean():.3f} | {walls.mean():.3f} | {peak:.2f} |"
        + (f" {calls.mean():.1f} | {seconds.mean():.3f} |" if prior else "")
    )
