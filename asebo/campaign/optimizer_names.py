"""The names of the optimizers a comparison takes, apart from the optimizers themselves.

Importing :mod:`asebo.campaign.relax` brings PyTorch (through the priors); ``asebo
compare --help`` lists these names without it, and its error for an unknown optimizer
lists the same ones (:func:`asebo.campaign.plan.parse_optimizer`).
"""

OPTIMIZER_NAMES = ("bo", "bfgs", "lbfgs", "fire", "gpmin", "preconlbfgs", "sella", "geometric")
"""The keys of :data:`asebo.campaign.relax.OPTIMIZERS`, in its order: a name added
there is added here."""
