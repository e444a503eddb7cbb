"""Compare BOOptimizer with L-BFGS and FIRE on two molecules, from Python.

Ethanol comes from a SMILES (RDKit builds it), water from ASE's G2 set. Each is
relaxed with GFN2-xTB from 3 starts perturbed by 0.1 Å; the runs are stored in
``compare_molecules.db`` (run the script again: nothing is recomputed), summarised,
and plotted to ``compare_molecules_best.png`` and ``compare_molecules_runs.png``.
One to two minutes on two cores.
"""

import argparse

from asebo.campaign import format_summary, plot_best_energy, plot_runs, run_campaign, summarize


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    records = run_campaign(
        ["water", "smiles:CCO"],
        ["bo", "lbfgs", "fire"],
        starts=3,
        noise=0.1,
        seed=0,
        calc="gfn2",
        fmax=0.05,
        db="compare_molecules.db",
    )
    print(format_summary(summarize(records)))
    for path in plot_best_energy(records, "compare_molecules") + plot_runs(
        records, "compare_molecules"
    ):
        print("wrote", path)


if __name__ == "__main__":  # the local Dask cluster starts worker processes
    main()
