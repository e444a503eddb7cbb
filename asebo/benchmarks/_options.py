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


def _argument_type(convert, accept, needs):
    """An argparse type: the text ``convert`` ed, refused in one line (``must be
    {needs}``) where it does not convert or ``accept`` does not take it."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"must be {needs}, got {text!r}")
        return value

    return parse


positive_int = _argument_type(int, lambda value: value >= 1, "a whole number of 1 or more")
"""A count of 1 or more (``--jobs``, ``--steps``)."""
positive_float = _argument_type(
    float, lambda value: math.isfinite(value) and value > 0, "a positive number"
)
"""A positive finite number (``--fmax``, ``--limit``)."""
nonnegative_float = _argument_type(
    float, lambda value: math.isfinite(value) and value >= 0, "a number of 0 or more"
)
"""A finite number of 0 or more (``--rattle``, Å)."""


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
