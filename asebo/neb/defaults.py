"""The defaults of :class:`asebo.neb.BONEB` that differ from :class:`asebo.BOOptimizer`'s:
a molecule's band leaves the harmonic well of any one configuration."""

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
