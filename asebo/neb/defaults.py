"""The defaults of :class:`asebo.neb.BONEB` that differ from :class:`asebo.BOOptimizer`'s:
a molecule's band leaves the harmonic well of any one configuration."""

from asebo.model.prior_names import AUTO
from asebo.model.priors import automatic_prior, resolve_prior

MOLECULE_PRIOR = "max"
"""The prior of a molecule's band where GFN2-xTB cannot be its prior
(:func:`molecule_band_prior`): the highest energy computed. The Lindh model around one
configuration (BOOptimizer's default) is far off across a reaction (a band on it and the
internal coordinates, measured: docs/notes/molecular-bands.md)."""
MOLECULE_KERNEL = "inverse"
"""The default kernel of a molecule's band of three atoms or more: the Gaussian kernel on
the inverse distances of every pair of atoms
(:class:`asebo.optimize.representations.InverseDistancePositions`), which needs no
reference configuration across a reaction; two atoms take Cartesian positions."""

RELAXATION_ENDS = {
    "model fmax": "band relaxed on the model",
    "steps": "band relaxed on the model",
    "trust radius": "band stopped at the trust radius",
    "prior failed": "band stopped where the prior calculator failed",
}
"""The log's words for each end of :func:`asebo.neb.relax.relax_on_model`."""


def molecule_band_prior(prior, moving):
    """The prior of a molecule's band for BONEB's ``prior`` argument, and why (or None).

    None and ``'auto'`` take GFN2-xTB (tblite) as the prior where
    :func:`asebo.model.priors.automatic_prior` takes it (a target other than tblite,
    elements GFN2-xTB describes): the GP then learns the target's difference to it, and
    the prior gives the stiff bonds one length scale cannot. Elsewhere they take
    :data:`MOLECULE_PRIOR`. Any other ``prior`` is returned as it is.

    Parameters
    ----------
    prior : None, str, float, ase calculator or Prior
    moving : ase.Atoms
        A moving image, with the target calculator.

    Returns
    -------
    prior : str, float, ase calculator or Prior
    why : str or None
        A line for the log where ``prior`` was None or ``'auto'``.
    """
    if prior is not None and not (isinstance(prior, str) and prior == AUTO):
        return prior, None
    choice, reason = automatic_prior(moving)
    if choice == "gfn2":
        return resolve_prior(choice), f"prior: {reason}"
    return MOLECULE_PRIOR, f"prior: the highest energy computed ({reason})"
