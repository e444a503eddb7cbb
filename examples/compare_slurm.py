"""A large comparison campaign on a SLURM cluster through dask-jobqueue.

Starts Dask workers as SLURM jobs (one core each), runs 40 perturbed starts of three
molecules with five optimizers (the protocol of Wong & Kolter's Figs. 2-3), and
writes each finished run to ``slurm_campaign.db`` on the node running this script.
Interrupt it and start it again: the stored runs are skipped. Needs
``pip install 'asebo[cluster]'`` and asebo installed where the workers run; adapt
``queue``, ``account`` and ``walltime`` to your site.
"""

import argparse

from dask.distributed import Client
from dask_jobqueue import SLURMCluster

from asebo.campaign import format_summary, plot_best_energy, plot_runs, run_campaign, summarize


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    cluster = SLURMCluster(
        queue="compute",
        account="my_account",
        cores=1,
        processes=1,
        memory="4GB",
        walltime="04:00:00",
        job_script_prologue=["export OMP_NUM_THREADS=1"],
    )
    cluster.scale(jobs=32)
    with Client(cluster) as client:
        print("dashboard:", client.dashboard_link)
        records = run_campaign(
            ["H2O", "NH3", "CH3OH"],
            ["bo", "bo+gfn1", "lbfgs", "bfgs", "fire"],
            starts=40,
            noise=0.1,
            seed=0,
            calc="gfn2",
            fmax=0.05,
            db="slurm_campaign.db",
            scheduler=cluster.scheduler_address,
        )
    cluster.close()
    print(format_summary(summarize(records)))
    plot_best_energy(records, "slurm_campaign")
    plot_runs(records, "slurm_campaign")


if __name__ == "__main__":
    main()
