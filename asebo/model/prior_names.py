"""The names a user gives the prior mean, apart from the priors themselves.

Importing :mod:`asebo.model.priors` brings PyTorch (through the Lindh model); the
command line builds its help from these names without it.
"""

MODEL_PRIORS = ("lindh", "max", "mean")
"""Names of the priors that need no calculator: the Lindh model Hessian's harmonic energy, the
highest energy seen, the mean energy seen."""

AUTO = "auto"
"""The prior chosen from the system and its calculator by
:func:`asebo.model.default_prior.default_prior` with ``any_target``."""
