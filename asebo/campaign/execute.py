"""Running the runs of a campaign: in this process, on all cores, or on a Dask cluster.

The runs go to Dask workers (a :class:`dask.distributed.LocalCluster` of processes
with one thread each by default, or any scheduler's address: a cluster started with
``dask-jobqueue``'s ``SLURMCluster`` or ``dask scheduler``/``dask worker``). Only this
process writes to the database, each run as soon as it is back, so workers need no
access to the database file and an interrupted campaign keeps every finished run.

Each run is claimed in the database before it is computed
(:meth:`asebo.campaign.CampaignStore.claim`): a second process started on the same
database skips the runs the first claimed and waits for them to be stored, so no
run is computed or stored twice.
"""

import copy
import logging
import os
import time
import traceback
from contextlib import contextmanager

import numpy as np
from ase.calculators.calculator import all_changes
from dask.distributed import Client, LocalCluster, as_completed
from tqdm.auto import tqdm

from asebo.campaign.plan import parse_optimizer
from asebo.campaign.relax import relax
from calculators import CountingCalculator, get_calculator

SERIAL = "serial"
SLOW_FIRST = ("bo", "gpmin", "sella")  # submitted first so that no core idles at the end
POLL = 2.0  # seconds between looks at runs that another process computes


class EnergyTrace(CountingCalculator):
    """A :class:`calculators.CountingCalculator` that keeps every call's energy.

    Attributes
    ----------
    energies : list of float
        Energy after every call, eV, in order.
    positions, forces : ndarray, shape (n, 3)
        Positions and forces of the last call.
    """

    def __init__(self, calc):
        super().__init__(calc)
        self.energies = []
        self.positions = None
        self.forces = None

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.energies.append(float(self.results["energy"]))
        self.positions = self.atoms.get_positions()  # (n, 3)
        self.forces = np.array(self.results["forces"])  # (n, 3)


def _error_text(error):
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" (at {os.path.basename(last[0].filename)}:{last[0].lineno})" if last else ""
    return f"{type(error).__name__}: {error}{where}"


def run_one(run, calc, fmax, steps):
    """Relax one start with one optimizer; a failure is returned, not raised.

    Parameters
    ----------
    run : asebo.campaign.Run
    calc : str or ase calculator
        Preset name, or a calculator that is copied so that runs share no state.
    fmax : float
        Force threshold, eV/Å.
    steps : int
        Largest number of optimizer steps.

    Returns
    -------
    dict
        The result of :func:`asebo.campaign.relax.relax` with ``energies`` replaced by the
        energy after every force call and ``forces`` added (the final forces); or,
        when the run raised, ``error`` (the exception, one line), ``calls`` and
        ``energies`` up to the failure.
    """
    _, optimizer, prior = parse_optimizer(run.optimizer)
    trace = EnergyTrace(get_calculator(calc) if isinstance(calc, str) else copy.deepcopy(calc))
    try:
        result = relax(run.atoms, optimizer, trace, fmax=fmax, steps=steps, prior=prior)
    except Exception as error:  # recorded in the run's row; the campaign goes on
        return {"error": _error_text(error), "calls": trace.ncalls, "energies": trace.energies}
    result["energies"] = trace.energies
    same_place = trace.positions is not None and np.allclose(
        trace.positions, result["positions"], atol=1e-12
    )
    result["forces"] = trace.forces if same_place else None
    return result


def _submission_order(runs):
    return sorted(runs, key=lambda run: parse_optimizer(run.optimizer)[1] not in SLOW_FIRST)


@contextmanager
def dask_client(scheduler=None, workers=None):
    """A Dask client: of a new local cluster, or of a running scheduler.

    Parameters
    ----------
    scheduler : str, optional
        None for a :class:`dask.distributed.LocalCluster` of ``workers`` processes with
        one thread each (closed at the end); a scheduler address
        (``tcp://host:8786``); or the path of a scheduler file (``*.json``, written by
        ``dask scheduler --scheduler-file``).
    workers : int, optional
        Workers of the local cluster; default the number of cores.

    Yields
    ------
    dask.distributed.Client

    Raises
    ------
    ValueError
        When no scheduler answers at the address.
    """
    if workers is not None and int(workers) < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if scheduler is None:
        n_workers = int(workers or os.cpu_count() or 1)
        with (
            LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    if str(scheduler).endswith(".json") and not os.path.isfile(scheduler):
        raise ValueError(
            f"no Dask scheduler answers at {scheduler}: no such scheduler file. "
            "Start a scheduler with dask scheduler --scheduler-file "
            f"{scheduler}, or pass its address (tcp://host:8786)"
        )
    try:
        if str(scheduler).endswith(".json"):
            client = Client(scheduler_file=str(scheduler), timeout="30s")
        else:
            client = Client(str(scheduler), timeout="30s")
    except (OSError, TimeoutError, ValueError) as error:
        raise ValueError(
            f"no Dask scheduler answers at {scheduler} ({error}): start one "
            "(dask scheduler, or a dask-jobqueue cluster) and pass its address "
            "or scheduler file to --scheduler"
        ) from error
    with client:
        yield client


def _describe_client(client):
    workers = len(client.scheduler_info().get("workers", {}))
    return f"Dask scheduler {client.scheduler.address} ({workers} workers)"


def execute_runs(
    runs, campaign, store, scheduler=None, workers=None, progress=True, log=print, done=0, poll=POLL
):
    """Claim ``runs``, run those claimed and write each one to ``store`` as soon as it finishes.

    Runs that another process has claimed are not computed here: this function
    waits until that process has stored them (or has ended without doing so).
    Claims of processes of this host that have ended are released first; claims
    of this process that are not finished (an interruption) are released on the
    way out.

    Parameters
    ----------
    runs : list of asebo.campaign.Run
        The runs still to do.
    campaign : asebo.campaign.Campaign
    store : asebo.campaign.CampaignStore
    scheduler : str, optional
        ``'serial'`` to run here, one after the other; otherwise see
        :func:`dask_client`.
    workers : int, optional
        Workers of a local cluster; default the number of cores, at most one a run.
    progress : bool
        Show a progress bar (tqdm) that counts runs.
    log : callable
        Receives one line saying where the runs go.
    done : int
        Runs of the campaign already stored, where the progress bar starts.
    poll : float
        Seconds between looks at the runs that another process computes.

    Returns
    -------
    int
        Runs written by this process.
    """
    if not runs:
        return 0
    released = store.release(only_dead=True)
    if released:
        log(f"{store.name}: {len(released)} runs claimed by processes that ended are run again")
    planned, written = len(runs), 0
    while runs:
        mine = [run for run in runs if store.claim(run, campaign) is not None]
        claimed = {run.name for run in mine}
        others = [run for run in runs if run.name not in claimed]
        if others:
            log(
                f"{store.name}: {len(others)} runs are being computed by another process; "
                "this one waits for them"
            )
        try:
            written += _run_claimed(
                mine,
                campaign,
                store,
                scheduler,
                workers,
                progress,
                log,
                done + planned - len(runs) + len(others),
            )
        finally:
            store.release(claimed)  # those not finished, when interrupted
        orphaned = _wait_for({run.name for run in others}, store, log, poll)
        runs = [run for run in others if run.name in orphaned]
    return written


def _wait_for(names, store, log, poll):
    """Wait until the runs ``names`` claimed by other processes are finished, or their
    processes have ended without storing them.

    Returns
    -------
    set of (str, str, int)
        The runs whose processes ended without storing them: their claims are
        released, for this process to run them.
    """
    orphaned = set()
    while names:
        unfinished = {name for name in store.unfinished() if name in names}
        released = store.release(unfinished, only_dead=True)
        if released:
            log(
                f"{store.name}: a process that claimed {len(released)} runs ended without "
                "storing them: this one runs them"
            )
            orphaned.update(released)
        if not unfinished - orphaned:
            return orphaned
        time.sleep(poll)
    return orphaned


def _run_claimed(runs, campaign, store, scheduler, workers, progress, log, done):
    if not runs:
        return 0
    args = (campaign.calc, campaign.fmax, campaign.steps)

    def progress_bar():
        return tqdm(
            total=done + len(runs), initial=done, unit="run", desc="runs", disable=not progress
        )

    written = 0
    if scheduler == SERIAL:
        log(f"running {len(runs)} runs here, one after the other")
        with progress_bar() as bar:
            for run in runs:
                store.write(run, campaign, run_one(run, *args))
                written += 1
                bar.update()
        return written
    if scheduler is None and workers is None:
        workers = min(os.cpu_count() or 1, len(runs))
    with dask_client(scheduler, workers) as client:
        log(f"running {len(runs)} runs on {_describe_client(client)}")
        futures = {
            client.submit(run_one, run, *args, pure=False): run for run in _submission_order(runs)
        }
        with progress_bar() as bar:
            try:
                for future in as_completed(futures):
                    try:
                        result = future.result()
                    except Exception as error:  # a worker died: record it, go on
                        result = {
                            "error": f"worker lost: {_error_text(error)}",
                            "calls": 0,
                            "energies": [],
                        }
                    store.write(futures[future], campaign, result)
                    written += 1
                    bar.update()
            finally:
                client.cancel(list(futures))
    return written
