"""The prior mean of :class:`asebo.BOOptimizer` from its name.

A prior is a model that needs no second calculator (:data:`MODEL_PRIORS`), a number
(a constant energy, eV), or a cheap calculator whose energy and forces the GP
corrects (Δ-learning; Ramakrishnan et al., J. Chem. Theory Comput. 11, 2087 (2015)),
named by a preset of :func:`calculators.get_calculator` such as ``'gfn1'`` or
``'gpaw:mode=lcao'``.
"""

import importlib.util
from numbers import Real

import numpy as np

MODEL_PRIORS = ("lindh", "max", "mean")
"""Priors that need no calculator: the Lindh model Hessian's harmonic energy, the
highest energy seen, the mean energy seen."""

AUTO = "auto"
"""The prior chosen from the system and its calculator by :func:`automatic_prior`."""

XTB_LAST_ELEMENT = 86  # GFN2-xTB is parametrised for H to Rn


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
    if prior in MODEL_PRIORS or prior == AUTO:
        return prior
    from calculators import get_calculator

    try:
        return get_calculator(prior)
    except ValueError as error:
        raise ValueError(
            f"unknown prior {prior!r}: use one of {', '.join(MODEL_PRIORS)}, a "
            f"number, or a calculator preset ({error})"
        ) from None


def automatic_prior(atoms):
    """The prior ``prior='auto'`` takes for ``atoms`` and its calculator, and why.

    GFN2-xTB (tblite) when the target is another, presumably more expensive,
    calculator and GFN2-xTB describes the system (elements up to Rn, no periodic
    cell; charge and spin come from the atoms' initial charges and magnetic moments,
    as tblite reads them); otherwise what ``prior=None`` takes: the Lindh model for a
    molecule, the highest energy seen for a periodic cell.

    Parameters
    ----------
    atoms : ase.Atoms
        With the target calculator attached.

    Returns
    -------
    prior : str
        ``'gfn2'`` (a calculator preset), ``'lindh'`` or ``'max'``.
    reason : str
        One line for the log.
    """
    if np.any(atoms.pbc):
        return "max", "a periodic cell, which the GFN2-xTB prior here does not take"
    calculator = getattr(atoms, "calc", None)
    if type(calculator).__module__.startswith("tblite"):
        return "lindh", "the target is tblite itself: an xTB prior would cost as much"
    if importlib.util.find_spec("tblite") is None:
        return "lindh", "tblite is not installed (pip install tblite)"
    heavy = sorted({int(z) for z in atoms.numbers if z > XTB_LAST_ELEMENT})
    if heavy:
        return "lindh", f"GFN2-xTB has no parameters for atomic numbers {heavy}"
    return "gfn2", "GFN2-xTB (tblite) as the prior; the GP learns the difference"
