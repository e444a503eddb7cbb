"""Names given on a benchmark's command line, checked before any run."""


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
