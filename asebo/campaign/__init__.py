"""Comparison campaigns: optimizers against each other on perturbed molecules.

A campaign relaxes molecules (ASE names, structure files or SMILES) from randomly
perturbed starts with several optimizers and stores one ``ase.db`` row per run, the
protocol of Wong and Kolter (section "Bayesian optimization", Figs. 2-3). Modules:

- :mod:`~asebo.campaign.relax`: one counted relaxation with any optimizer;
- :mod:`~asebo.campaign.molecules`: molecules from names, files, SMILES;
- :mod:`~asebo.campaign.plan`: settings, campaign key, perturbed starts, runs;
- :mod:`~asebo.campaign.store`: the database;
- :mod:`~asebo.campaign.execute`: running, here or on a Dask cluster;
- :mod:`~asebo.campaign.summary` and :mod:`~asebo.campaign.plots`: table, figures;
- :mod:`~asebo.campaign.workflow`: all of it, as ``asebo compare`` does.

The names below are imported on first use, so that ``asebo.campaign.relax`` needs
neither Dask nor Matplotlib (``pip install 'asebo[campaign]'`` for the rest).

References
----------
.. [1] E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning
   from geometric data", Carnegie Mellon University (preprint).
"""

import importlib

_HOMES = {
    "run_one": "execute",
    "load_molecule": "molecules",
    "molecule_from_smiles": "molecules",
    "Campaign": "plan",
    "Run": "plan",
    "perturbed_start": "plan",
    "plan_runs": "plan",
    "best_energy_curves": "plots",
    "plot_best_energy": "plots",
    "plot_runs": "plots",
    "CampaignMismatchError": "store",
    "CampaignStore": "store",
    "RunRecord": "store",
    "format_legend": "summary",
    "format_result": "summary",
    "format_summary": "summary",
    "summarize": "summary",
    "run_campaign": "workflow",
}
__all__ = sorted(_HOMES)


def __getattr__(name):
    if name not in _HOMES:
        raise AttributeError(f"module 'asebo.campaign' has no attribute {name!r}")
    return getattr(importlib.import_module(f"asebo.campaign.{_HOMES[name]}"), name)


def __dir__():
    return __all__
