"""A whole campaign: molecules in, stored runs out, skipping what is already stored."""

from asebo.campaign.molecules import load_molecule
from asebo.campaign.plan import Campaign, plan_runs
from asebo.campaign.store import CampaignStore
from asebo.extras import missing_extra

try:
    from asebo.campaign.execute import execute_runs
except ModuleNotFoundError as error:
    raise missing_extra(error, "campaign", "asebo.campaign") from error


def run_campaign(
    molecules,
    optimizers=("bo", "lbfgs"),
    starts=5,
    noise=0.1,
    seed=0,
    calc="gfn2",
    prior=None,
    fmax=0.05,
    steps=200,
    db="compare.db",
    scheduler=None,
    workers=None,
    retry_failed=False,
    progress=True,
    log=print,
):
    """Relax every molecule from every start with every optimizer; store each run.

    Everything given is checked (molecules built, optimizers known, the database of
    the same campaign) before the first run starts. Runs already in ``db`` are
    skipped, so a campaign interrupted and started again does only the missing runs;
    a run that raises is stored as failed and the others go on.

    Parameters
    ----------
    molecules : list of str or (str, ase.Atoms)
        Names, files or SMILES (see :func:`asebo.campaign.load_molecule`), or labels
        with geometries.
    optimizers : list of str
        Keys of :data:`asebo.campaign.relax.OPTIMIZERS`, or ``'bo+NAME'`` for ``bo`` with a
        calculator prior.
    starts : int
        0: the geometry as given; N: N perturbed starts (Wong and Kolter used 40).
    noise : float
        Standard deviation of the perturbation of every coordinate, Å.
    seed : int
        Seed of the perturbations.
    calc : str or ase calculator
        Preset name (``'gfn2'``) or calculator.
    prior : str, optional
        Calculator preset used as the prior of every plain ``'bo'``.
    fmax : float
        Convergence threshold, eV/Å.
    steps : int
        Largest number of steps of one run.
    db : str or os.PathLike
        The ``ase.db`` database of the campaign.
    scheduler : str, optional
        None: a local Dask cluster on all cores; ``'serial'``: this process; else a
        Dask scheduler address or scheduler file.
    workers : int, optional
        Workers of the local Dask cluster.
    retry_failed : bool
        Delete the stored failed runs of the database and run them again.
    progress : bool
        Show a progress bar.
    log : callable
        Receives progress lines.

    Returns
    -------
    list of asebo.campaign.RunRecord
        The stored runs of this campaign's molecules, optimizers and starts, in the
        order given (molecule, then start, then optimizer).

    Raises
    ------
    ValueError
        For bad input, before any run; :class:`asebo.campaign.CampaignMismatchError`
        for a database of another campaign.
    """
    campaign = Campaign(calc=calc, fmax=fmax, steps=steps, noise=noise, seed=seed)
    loaded = [m if isinstance(m, tuple) else load_molecule(m) for m in molecules]
    runs = plan_runs(loaded, list(optimizers), starts, campaign, prior=prior)
    store = CampaignStore(db)
    store.check(campaign, {run.molecule: run.reference for run in runs})
    if retry_failed:
        removed = store.delete_failed()
        if removed:
            log(f"{store.name}: {removed} failed runs deleted, to run again")
    stored = store.stored()
    missing = [run for run in runs if run.name not in stored]
    log(
        f"{store.name}: {len(runs)} runs planned, {len(runs) - len(missing)} already stored, "
        f"{len(missing)} to run"
    )
    execute_runs(
        missing,
        campaign,
        store,
        scheduler=scheduler,
        workers=workers,
        progress=progress,
        log=log,
        done=len(runs) - len(missing),
    )
    order = {run.name: index for index, run in enumerate(runs)}
    records = store.records(set(order))
    return sorted(records, key=lambda r: order[(r.molecule, r.optimizer, r.start)])
