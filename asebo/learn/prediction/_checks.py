"""Checks of the counts and numbers given to :mod:`asebo.learn.prediction`."""

import math
import operator


def check_count(value, name, minimum=1):
    """``value`` as an int, refused unless it is a whole number of ``minimum`` or more."""
    try:
        count = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if count < minimum:
        raise ValueError(f"{name} must be {minimum} or more, got {count}")
    return count


def check_optional_count(value, name, minimum=1):
    """``None``, or ``value`` checked by :func:`check_count`."""
    return None if value is None else check_count(value, name, minimum)


def check_number(value, name, positive=False):
    """``value`` as a float, refused unless finite and positive (``positive``) or ``>= 0``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        needs = "a positive finite number" if positive else "a finite number of 0 or more"
        raise ValueError(f"{name} must be {needs}, got {value!r}")
    return number
