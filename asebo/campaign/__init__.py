"""Comparison campaigns: optimizers against each other on perturbed molecules.

A campaign relaxes molecules (ASE names, structure files or SMILES) from randomly
perturbed starts with several optimizers and stores one ``ase.db`` row per run, the
protocol of seed 003 (section "Bayesian optimization", Figs. 2-3). Modules:

- :mod:`~asebo.campaign.molecules`: molecules from names, files, SMILES;
- :mod:`~asebo.campaign.plan`: settings, campaign key, perturbed starts, runs;
- :mod:`~asebo.campaign.store`: the database;
- :mod:`~asebo.campaign.execute`: running, here or on a Dask cluster;
- :mod:`~asebo.campaign.summary` and :mod:`~asebo.campaign.plots`: table, figures;
- :mod:`~asebo.campaign.workflow`: all of it, as ``asebo compare`` does.
"""

from asebo.campaign.execute import run_one
from asebo.campaign.molecules import load_molecule, molecule_from_smiles
from asebo.campaign.plan import Campaign, Run, perturbed_start, plan_runs
from asebo.campaign.plots import best_energy_curves, plot_best_energy, plot_runs
from asebo.campaign.store import CampaignMismatchError, CampaignStore, RunRecord
from asebo.campaign.summary import format_summary, summarize
from asebo.campaign.workflow import run_campaign

__all__ = [
    "Campaign",
    "CampaignMismatchError",
    "CampaignStore",
    "Run",
    "RunRecord",
    "best_energy_curves",
    "format_summary",
    "load_molecule",
    "molecule_from_smiles",
    "perturbed_start",
    "plan_runs",
    "plot_best_energy",
    "plot_runs",
    "run_campaign",
    "run_one",
    "summarize",
]
