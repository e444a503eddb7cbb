"""Compare optimizers on molecules from perturbed starts; one ase.db row per run.

Relaxes every molecule (ASE name such as H2O or water, structure file, or SMILES)
from every start with every optimizer, stores each run in --db as soon as it
finishes, and prints a summary: force calls to converge, success rate, final energy
gap to the best energy found, calls relative to L-BFGS. Started again with the same
settings, it skips the runs already stored. Protocol of Wong & Kolter's comparison
of Bayesian optimization with L-BFGS (40 perturbed starts, Figs. 2-3).

example:
  asebo compare --molecules H2O NH3 CH3OH --optimizers bo lbfgs --starts 3 \\
      --noise 0.1 --calc gfn2 --fmax 0.05 --seed 0 --db demo.db --plot demo
"""

import os
import sys
from pathlib import Path

from asebo.campaign.optimizer_names import OPTIMIZER_NAMES
from asebo.campaign.summary import (
    format_failures,
    format_legend,
    format_result,
    format_summary,
    summarize,
)


def add_arguments(parser):
    parser.add_argument(
        "--molecules",
        nargs="+",
        metavar="MOLECULE",
        help="ASE names (H2O, CH3CH2OH, water), structure files, or SMILES "
        "(CCO; 'smiles:CO' where a name would be read first)",
    )
    parser.add_argument(
        "--optimizers",
        nargs="+",
        default=["bo", "lbfgs"],
        metavar="OPTIMIZER",
        help=f"{', '.join(OPTIMIZER_NAMES)}, or bo+PRIOR such as bo+gfn1 (default: bo lbfgs)",
    )
    parser.add_argument(
        "--starts",
        type=int,
        default=5,
        help="perturbed starts per molecule; 0 runs the geometry as given "
        "(default 5; the paper used 40)",
    )
    parser.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="standard deviation of the Gaussian noise on every coordinate, Å (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations")
    parser.add_argument(
        "--calc",
        default="gfn2",
        help="calculator preset: gfn2 (default), gfn1, gpaw, emt, lj, "
        "with options as in gpaw:h=0.25,vacuum=3.5",
    )
    parser.add_argument(
        "--prior",
        default=None,
        help="calculator preset used as the prior of bo (Δ-learning), e.g. "
        "gfn1; the runs are labelled bo+PRIOR",
    )
    parser.add_argument(
        "--fmax", type=float, default=0.05, help="force threshold, eV/Å (default 0.05)"
    )
    parser.add_argument(
        "--steps", type=int, default=200, help="largest number of steps of one run (default 200)"
    )
    parser.add_argument(
        "--db", default="compare.db", help="ase.db database of the campaign (default compare.db)"
    )
    parser.add_argument(
        "--plot",
        default=None,
        metavar="PREFIX",
        help="write PREFIX_best.png/.pdf (mean best energy against force "
        "calls) and PREFIX_runs.png/.pdf (every run)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Dask scheduler address (tcp://host:8786) or scheduler file "
        "(.json); 'serial' runs here one after the other; default a "
        "local cluster on all cores",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="workers of the local cluster (default: the number of cores)",
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="run the stored failed runs again"
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="run nothing: summarise (and plot) every run stored in --db",
    )
    parser.add_argument(
        "--markdown", default=None, metavar="FILE", help="also write the summary table to FILE"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _log(line):
    print(line, file=sys.stderr, flush=True)


def _settings(args):
    """The calculator and force threshold of the runs: stored ones for --report."""
    if not args.report:
        return args.calc, args.fmax
    import ase.db

    row = next(ase.db.connect(args.db).select(limit=1))
    return row.get("calc", "?"), row.get("target_fmax", float("nan"))


def _records(args):
    # ase.db, Dask and the optimizers are imported here, not for --help
    from asebo.campaign.store import CampaignStore
    from asebo.campaign.workflow import run_campaign

    if args.report:
        records = CampaignStore(args.db).records()
        if not records:
            raise ValueError(f"{args.db} holds no runs to report")
        return records
    if not args.molecules:
        raise ValueError(
            "give --molecules (names, files or SMILES), or --report to summarise a database"
        )
    return run_campaign(
        args.molecules,
        args.optimizers,
        starts=args.starts,
        noise=args.noise,
        seed=args.seed,
        calc=args.calc,
        prior=args.prior,
        fmax=args.fmax,
        steps=args.steps,
        db=args.db,
        scheduler=args.scheduler,
        workers=args.workers,
        retry_failed=args.retry_failed,
        progress=not args.no_progress,
        log=_log,
    )


def _check_db(args):
    """Refuse a ``--db`` that cannot be read or written, before any run: none to
    ``--report``, a folder that does not exist, a file that is no database."""
    import sqlite3

    import ase.db

    from asebo.commands.optimize import _why_unwritable

    path = Path(args.db)
    if args.report and not path.is_file():
        raise ValueError(f"{path} does not exist: give the database of the runs to report")
    problem = None if args.report else _why_unwritable(path)
    if problem is not None:
        raise ValueError(f"--db {path}: {problem}")
    if path.is_file():
        try:
            with ase.db.connect(path) as db:
                db.count()
        except (sqlite3.DatabaseError, ValueError) as error:
            raise ValueError(
                f"{path} cannot be read as an ase.db database ({error}): give another --db"
            ) from error


def _check_markdown(args):
    """Refuse a ``--markdown`` file that cannot be written, or that is the ``--db`` or
    a molecule file of the campaign, before any run."""
    from asebo.commands.optimize import _why_unwritable
    from asebo.optimize.system_checks import check_distinct_files

    if args.markdown is None:
        return
    problem = _why_unwritable(Path(args.markdown))
    if problem is not None:
        raise ValueError(f"--markdown {args.markdown}: {problem}")
    check_distinct_files(**{"--markdown": args.markdown, "--db": args.db, **_molecule_files(args)})


def _molecule_files(args):
    """The molecules of the campaign given as files: option -> path."""
    return {f"--molecules {m}": m for m in args.molecules or () if Path(m).is_file()}


def _check_plot(args):
    """Refuse a ``--plot`` PREFIX whose pictures cannot be written (a folder that cannot
    be made or written in, a picture that cannot be replaced) or are the ``--db``, the
    ``--markdown`` file or a molecule file, before any run."""
    from asebo.campaign.plots import FORMATS
    from asebo.commands.optimize import _why_unwritable
    from asebo.optimize.system_checks import check_distinct_files

    if args.plot is None:
        return
    others = {"--db": args.db, "--markdown": args.markdown, **_molecule_files(args)}
    for name in ("best", "runs"):
        for extension in FORMATS:
            path = Path(f"{args.plot}_{name}.{extension}")
            folder = path.parent
            problem = _why_unwritable(path) if folder.is_dir() else _why_not_made(folder)
            if problem is not None:
                raise ValueError(f"--plot {args.plot}: {problem}")
            check_distinct_files(**{"--plot": path, **others})


def _why_not_made(folder):
    """Why the folder ``folder``, which is none, cannot be made as the plots make theirs
    (with its parents), or None where it can."""
    above = Path(os.path.abspath(folder))  # '..' taken as the name says, as mkdir does
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        return (
            f"the folder {folder} cannot be made: {above} is a file, not a folder; give "
            "another PREFIX"
        )
    if not os.access(above, os.W_OK):
        return (
            f"the folder {folder} cannot be made: {above} cannot be written to; give a "
            "PREFIX in a folder you can write to"
        )
    return None


def run(args):
    try:
        _check_db(args)
        _check_markdown(args)
        _check_plot(args)
        records = _records(args)
    except ValueError as error:
        print(f"asebo compare: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"\nasebo compare: interrupted; the finished runs are in {args.db}: run the "
            "same command again to do the rest",
            file=sys.stderr,
        )
        return 130
    rows = summarize(records)
    table = format_summary(rows)
    calc, fmax = _settings(args)
    print(f"{table}\n\n{format_legend(calc, fmax)}")
    result = format_result(rows)
    if result:
        print(result)
    failures = format_failures(records)
    if failures:
        print("\nfailed runs (stored; --retry-failed runs them again):\n" + failures)
    if args.markdown:
        with open(args.markdown, "w") as fd:
            fd.write(table + "\n")
    if args.plot:
        from asebo.campaign.plots import plot_best_energy, plot_runs

        paths = plot_best_energy(records, args.plot) + plot_runs(records, args.plot)
        _log("plots: " + ", ".join(str(p) for p in paths))
    return 0
