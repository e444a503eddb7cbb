"""Optional parts of asebo and the error that names the extra to install.

``pip install asebo`` gives :class:`asebo.BOOptimizer` and the calculator presets.
The rest comes with extras: ``pip install 'asebo[EXTRA]'`` for one of :data:`EXTRAS`,
or ``'asebo[all]'``.
"""

import importlib.util

EXTRAS = {
    "learn": "MLKRR, IOKR, MP-IOKR, diffusion maps, energy prediction and their benchmarks "
    "(scikit-learn, Matplotlib, RDKit, qm9pack, qmllib, tqdm)",
    "campaign": "comparison campaigns, 'asebo compare' (Dask, Matplotlib, RDKit, tqdm)",
    "gpaw": "the GPAW (DFT) calculator preset",
    "ml": "the CHGNet calculator preset: a machine-learned prior for materials",
    "sella": "the Sella optimizer in comparisons",
    "geometric": "the geomeTRIC optimizer in comparisons",
    "cluster": "campaigns on a SLURM cluster (dask-jobqueue)",
    "docs": "building the documentation (MkDocs)",
    "test": "the tests and the linter (pytest, ruff)",
}
"""Extras of ``pip install 'asebo[EXTRA]'`` and what each adds."""


def missing_extra(error, extra, needed_by):
    """The ImportError to raise when a package of an extra is not installed.

    Parameters
    ----------
    error : ImportError
        The error of the failed import.
    extra : str
        A key of :data:`EXTRAS`.
    needed_by : str
        What needs the package, e.g. ``'asebo.learn.mlkrr'``.

    Returns
    -------
    ImportError
        Names the missing package and the ``pip install`` command that adds it.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; choose one of {', '.join(EXTRAS)}")
    package = (error.name or str(error)).partition(".")[0]
    return ImportError(
        f"{needed_by} needs {package}, which is not installed: pip install 'asebo[{extra}]'"
    )


OPTIONAL_OPTIMIZERS = {"sella": "Sella", "geometric": "geomeTRIC"}
"""Optimizers that need a package of their own (the module name is the optimizer's)."""


def missing_optimizer_package(optimizer):
    """The error message when ``optimizer`` needs a package that is not installed, else None."""
    if optimizer in OPTIONAL_OPTIMIZERS and importlib.util.find_spec(optimizer) is None:
        return (
            f"the {optimizer} optimizer needs {OPTIONAL_OPTIMIZERS[optimizer]}: "
            f"pip install 'asebo[{optimizer}]'"
        )
    return None
