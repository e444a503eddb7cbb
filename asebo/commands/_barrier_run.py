"""What ``asebo neb`` and ``asebo saddle`` share with ``asebo optimize``: the checks of
their numbers and files before any call, and a run whose every stop says in one line
what its restart file keeps."""

import math
from pathlib import Path

from asebo.commands import FAILED, CommandExit
from asebo.commands.optimize import (
    _one_line,
    _refuse,
    _why_unwritable,
    add_threads_option,
    failed_calculator,
)


def add_run_options(parser):
    """The options of the run itself that ``asebo neb`` and ``asebo saddle`` share:
    ``--restart``, ``--threads`` and ``--logfile``."""
    parser.add_argument(
        "--restart",
        type=Path,
        default=None,
        help="restart file: read if present, written after every call",
    )
    add_threads_option(parser)
    parser.add_argument("--logfile", default="-")


def check_numbers(args):
    """Refuse an ``--fmax``, ``--steps`` or ``--threads`` that cannot be."""
    if not (math.isfinite(args.fmax) and args.fmax > 0):
        raise _refuse(f"--fmax must be a positive force in eV/Å, got {args.fmax}")
    if args.steps < 0:
        raise _refuse(f"--steps must be 0 or more, got {args.steps}")
    if args.threads is not None and args.threads < 1:
        raise _refuse(f"--threads must be 1 or more, got {args.threads}")


def check_distinct(files):
    """Refuse two of ``files`` (option -> path or None; ``--logfile`` ``'-'`` is the
    screen) that are one file."""
    from asebo.optimize.system_checks import check_distinct_files

    try:
        check_distinct_files(**files)
    except ValueError as error:
        raise _refuse(_one_line(error)) from error


def check_writable(files):
    """Refuse a file of ``files`` (option -> path or None) that cannot be written."""
    for option, path in files.items():
        if path is None or (option == "--logfile" and path == "-"):
            continue
        problem = _why_unwritable(Path(path))
        if problem is not None:
            raise _refuse(f"{option} {path}: {problem}")


def driver(build, subject):
    """``build()``, the driver, or a refusal in one line (naming ``subject``) of what it
    refuses before any call."""
    from asebo.optimize.observations import RestartError

    try:
        return build()
    except (ValueError, TypeError, PermissionError, RestartError, FileNotFoundError) as error:
        raise _refuse(f"{subject}: {_one_line(error)}") from error
    except ImportError as error:  # an extra the driver needs (Sella)
        raise _refuse(_one_line(error)) from error


def run_driver(opt, args, stopped, failed_on, noun):
    """Whether ``opt.run(fmax, steps)`` converged. Ctrl-C stops the command with the line
    ``stopped()`` and what the restart file keeps; a file not written (a full disk) or
    the calculator's error (on ``failed_on``) with :data:`asebo.commands.FAILED` and one
    line; ``noun`` names what the restart file keeps (``'images computed'``)."""
    try:
        return opt.run(fmax=args.fmax, steps=args.steps)
    except KeyboardInterrupt as interrupt:
        raise KeyboardInterrupt(f"{stopped()}{kept(args.restart, noun)}") from interrupt
    except OSError as error:
        raise CommandExit(
            f"could not write {error.filename or 'a file'}: {error.strerror or _one_line(error)}"
            f"{kept(args.restart, noun, ' saved before')}",
            FAILED,
        ) from error
    except Exception as error:  # the calculator's own errors
        raise CommandExit(
            f"{failed_calculator(args.calc, error)} failed on {failed_on}: "
            f"{type(error).__name__}: "
            f"{_one_line(error)}{kept(args.restart, noun, ' so far')}",
            FAILED,
        ) from error


def kept(restart, noun, which=""):
    """What the restart file keeps, read back from it, as the end of a line: ``'; the 7
    images computed are kept in band.json (run again to resume)'`` (``which`` after
    ``noun``); empty where it holds none, a hint to pass ``--restart`` without one."""
    from asebo.optimize.observations import RestartError, check_restart

    if restart is None:
        return f"; pass --restart to keep the {noun}"
    try:
        stored = check_restart(str(restart))
    except RestartError as error:
        return f"; {_one_line(error)}"
    saved = 0 if stored is None else len(stored["energies"])
    if not saved:
        return ""
    return f"; the {saved} {noun}{which} are kept in {restart} (run again to resume)"


def where_kept(restart, noun):
    """Where the result is when the output cannot be written."""
    if restart is None:
        return f"pass --restart to keep the {noun}"
    return f"the {noun} are kept in {restart}: run again with another --output"
