"""The prior mean of :class:`asebo.BOOptimizer` from its name.

A prior is a model that needs no second calculator (:data:`MODEL_PRIORS`), a number
(a constant energy, eV), or a cheap calculator whose energy and forces the GP
corrects (Δ-learning; Ramakrishnan et al., J. Chem. Theory Comput. 11, 2087 (2015)),
named by a preset of :func:`calculators.get_calculator` such as ``'gfn1'`` or
``'gpaw:mode=lcao'``.
"""

from numbers import Real

MODEL_PRIORS = ("lindh", "max", "mean")
"""Priors that need no calculator: the Lindh model Hessian's harmonic energy, the
highest energy seen, the mean energy seen."""


def resolve_prior(prior):
    """The ``prior`` argument of :class:`asebo.BOOptimizer` for a name, number or calculator.

    Parameters
    ----------
    prior : None, str, float or ase calculator
        None (the optimizer's default), a name of :data:`MODEL_PRIORS`, a number, a
        calculator preset (``'gfn1'``, ``'gpaw:mode=lcao'``) or a calculator.

    Returns
    -------
    None, str, float or ase calculator
        ``prior`` itself, except that a preset name becomes a fresh calculator.

    Raises
    ------
    ValueError
        For a string that is neither a model prior nor a calculator preset.
    """
    if not isinstance(prior, str):
        if isinstance(prior, Real) and not isinstance(prior, bool):
            return float(prior)
        return prior
    if prior in MODEL_PRIORS:
        return prior
    from calculators import get_calculator

    try:
        return get_calculator(prior)
    except ValueError as error:
        raise ValueError(
            f"unknown prior {prior!r}: use one of {', '.join(MODEL_PRIORS)}, a "
            f"number, or a calculator preset ({error})"
        ) from None
