"""Names and numbers given on a benchmark's command line, checked before any run."""

import argparse
import math


def refuse_unknown(command, checks):
    """Exit with a one-line message naming the option for the first name refused.

    Parameters
    ----------
    command : str
        ``'asebo bench neb'``, say: the message's start.
    checks : iterable of (str, callable, str or None)
        The option, the function that raises ValueError for a name it does not know
        (:func:`asebo.model.priors.resolve_prior`, :func:`calculators.get_calculator`),
        and the name given; None is not checked.
    """
    for option, check, value in checks:
        if value is None:
            continue
        try:
            check(value)
        except ValueError as error:
            raise SystemExit(f"{command} {option}: {error}") from None


def positive_int(text):
    """argparse's type of a count of 1 or more (``--jobs``, ``--steps``): a one-line
    error otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return value


def positive_float(text):
    """argparse's type of a positive finite number (``--fmax``, ``--limit``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def nonnegative_float(text):
    """argparse's type of a finite number of 0 or more (``--rattle``, Å)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of 0 or more, got {text!r}")
    return value


def refuse_missing(command, folder, names):
    """Exit with a one-line message where a name of ``names`` has no ``NAME.xyz`` in
    ``folder`` (``--reactions``)."""
    from pathlib import Path

    missing = [name for name in names if not (Path(folder) / f"{name}.xyz").is_file()]
    if missing:
        raise SystemExit(
            f"{command} --reactions: no {', '.join(missing)} in {folder}: give file names "
            "without .xyz of that folder"
        )
