"""Relax water, ethanol and glycerol with GPAW: BOOptimizer with three kinds of
prior mean against ASE's L-BFGS and Sella.

Wong and Kolter's comparison (Figs. 2-3) on a real DFT calculator: each molecule is first
relaxed with GFN2-xTB (glycerol is built from its SMILES by RDKit), then 5 copies
perturbed by Gaussian noise of sigma = 0.1 Å on every coordinate (seed 0) are relaxed
with GPAW (PBE; LCAO with the dzp basis and grid spacing ``--h`` by default, or
the finite-difference grid with ``--mode fd``) to fmax = 0.05 eV/Å by

- ``bo``: :class:`asebo.BOOptimizer` with its default prior mean, GFN2-xTB under GPAW
  (:func:`asebo.model.default_prior.default_prior`; for the radicals and cations from
  the atoms' magnetic moments and GPAW's charge), the same as ``bo+gfn2`` here,
- ``bo+lindh``: the same with the Lindh model as prior mean (:mod:`asebo.model.lindh`),
  no second calculator,
- ``bo+max``: the same with a constant prior mean (the highest energy seen),
- ``bo+gfn2``: the same with GFN2-xTB as prior mean (the GP learns GPAW - GFN2),
- ``lbfgs``: ASE's L-BFGS,
- ``sella``: Sella in internal coordinates (``pip install 'asebo[sella]'``).

``--molecules`` also takes five check molecules that played no part in choosing
BOOptimizer's defaults: ammonia, formaldehyde, methanol, formic_acid, acetaldehyde
(docs/compare.md); and eight systems a user would not hand to a second, cheaper
method, also never used in a choice: five radicals (spin-polarised from ASE's
initial magnetic moments), two cations (the charge given to GPAW) and the Na4
cluster. These start from their G2 geometry, or one built by hand, perturbed the same
way, with no GFN2-xTB relaxation first; ``bo+gfn2`` is not run on them.

Each molecule has its own database ``gpaw_<molecule>.db`` in ``--output``: run the
script again and the runs already stored are not recomputed; ``--optimizers`` runs a
part of the comparison, ``--report`` only summarises what is stored. It prints the summary
table of each molecule and writes ``gpaw_<molecule>_best.png/.pdf`` (mean best energy
against force calls) and ``gpaw_<molecule>_runs.png/.pdf`` (every run). With the
defaults (LCAO, spacing 0.2 Å, 3.5 Å of vacuum) one glycerol force call takes about
7 s of one core. A coarser grid is no saving: at 0.25 Å the egg-box ripple of the
oxygen setup makes the energy surface rough on the scale of the last meV, and the
relaxations of water already take 5 to 20 times more calls.
"""

import argparse
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.build import molecule
from ase.collections import g2
from ase.optimize import BFGS

from asebo.campaign import (
    CampaignStore,
    format_summary,
    load_molecule,
    plot_best_energy,
    plot_runs,
    run_campaign,
    summarize,
)
from calculators import get_calculator

MOLECULES = {"water": "H2O", "ethanol": "CH3CH2OH", "glycerol": "smiles:OCC(O)CO"}
CHECK_MOLECULES = {
    "ammonia": "NH3",
    "formaldehyde": "H2CO",
    "methanol": "CH3OH",
    "formic_acid": "HCOOH",
    "acetaldehyde": "CH3CHO",
}
OPEN_SHELL_AND_IONS = {  # name: (G2 name or builder, charge)
    "methyl": ("CH3", 0),
    "nitrogen_dioxide": ("NO2", 0),
    "methylene_triplet": ("CH2_s3B1d", 0),
    "methoxy": ("CH3O", 0),
    "ethoxy": ("CH3CH2O", 0),
    "ammonium": ("ammonium", 1),
    "hydronium": ("hydronium", 1),
    "sodium4": ("sodium4", 0),
}
ALL_MOLECULES = MOLECULES | CHECK_MOLECULES
OPTIMIZERS = ("bo", "bo+lindh", "bo+max", "bo+gfn2", "lbfgs", "sella")
N_H = 1.03  # Å: N-H of the ammonium start
NA_NA = 3.4  # Å: side of the Na4 rhombus start


def built_start(name):
    """The start geometry of a system of ``OPEN_SHELL_AND_IONS`` that ASE's G2 set lacks.

    Ammonium is a regular tetrahedron, hydronium ammonia's pyramid with oxygen in
    place of nitrogen, Na4 a planar rhombus of 60 degrees.
    """
    if name == "ammonium":
        a = N_H / np.sqrt(3)
        return Atoms("NH4", positions=[[0, 0, 0], [a, a, a], [-a, -a, a], [-a, a, -a], [a, -a, -a]])
    if name == "hydronium":
        atoms = molecule("NH3")
        atoms.numbers[0] = 8
        return atoms
    height = NA_NA * np.sqrt(3) / 2
    return Atoms(
        "Na4",
        positions=[[0, 0, 0], [NA_NA, 0, 0], [NA_NA / 2, height, 0], [1.5 * NA_NA, height, 0]],
    )


def reference(name):
    """The geometry, without calculator, that the starts of ``name`` perturb."""
    if name in OPEN_SHELL_AND_IONS:
        spec = OPEN_SHELL_AND_IONS[name][0]
        return molecule(spec) if spec in g2.names else built_start(spec)
    return gfn2_minimum(ALL_MOLECULES[name])


def gfn2_minimum(spec):
    """The molecule ``spec`` relaxed with GFN2-xTB to 0.01 eV/Å, without calculator."""
    atoms = load_molecule(spec)[1]
    atoms.calc = get_calculator("gfn2")
    BFGS(atoms, logfile=None).run(fmax=0.01)
    atoms.calc = None
    return atoms


def same_start_gaps(records):
    """Mean and largest final-energy gap (meV) of each optimizer to the lowest final
    energy reached from the same start.

    On a real-space grid the energy of a molecule depends a little on its orientation
    to the grid (the egg-box effect); perturbed starts end in different orientations,
    so the gap to the best energy of the whole molecule mixes that spread with the
    optimizers' differences. From one start every optimizer ends in about the same
    orientation.
    """
    best = {}
    for record in records:
        if record.converged:
            best[record.start] = min(best.get(record.start, record.energy), record.energy)
    gaps = {}
    for record in records:
        if record.converged:
            gaps.setdefault(record.optimizer, []).append(
                1000 * (record.energy - best[record.start])
            )
    return {
        optimizer: (float(np.mean(values)), float(np.max(values)))
        for optimizer, values in gaps.items()
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--molecules",
        nargs="+",
        choices=sorted(ALL_MOLECULES | OPEN_SHELL_AND_IONS),
        default=list(MOLECULES),
        help="the three compared in docs/compare.md (default), or check systems",
    )
    parser.add_argument("--optimizers", nargs="+", choices=OPTIMIZERS, default=list(OPTIMIZERS))
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--mode", choices=("lcao", "fd"), default="lcao")
    parser.add_argument("--h", type=float, default=0.2, help="grid spacing, Å")
    parser.add_argument("--vacuum", type=float, default=3.5, help="vacuum around, Å")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local Dask workers, at least 1 (default: one process, serial)",
    )
    parser.add_argument("--output", type=Path, default=Path("."))
    parser.add_argument(
        "--report", action="store_true", help="run nothing: summarise and plot every run stored"
    )
    args = parser.parse_args()
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")

    args.output.mkdir(parents=True, exist_ok=True)
    for name in args.molecules:
        prefix = args.output / f"gpaw_{name}"
        calc = f"gpaw:mode={args.mode},h={args.h},vacuum={args.vacuum}"
        charge = OPEN_SHELL_AND_IONS.get(name, (None, 0))[1]
        if charge:
            calc += f",charge={charge}"
        if args.report:
            if not Path(f"{prefix}.db").exists():
                print(f"\n{name}: no runs stored in {prefix}.db; run without --report first")
                continue
            records = CampaignStore(f"{prefix}.db").records()
        else:
            optimizers = args.optimizers
            if name in OPEN_SHELL_AND_IONS:
                optimizers = [label for label in optimizers if label != "bo+gfn2"]
            records = run_campaign(
                [(name, reference(name))],
                optimizers,
                starts=args.starts,
                noise=0.1,
                seed=0,
                calc=calc,
                fmax=0.05,
                db=f"{prefix}.db",
                scheduler=None if args.workers else "serial",
                workers=args.workers,
            )
        print(f"\n{name} ({calc}, sigma 0.1 Å)")
        print(format_summary(summarize(records)))
        for optimizer, (mean, largest) in same_start_gaps(records).items():
            print(
                f"{optimizer}: gap to the best final energy of the same start "
                f"{mean:.2f} meV on average, {largest:.2f} meV at most"
            )
        for path in plot_best_energy(records, prefix) + plot_runs(records, prefix):
            print("wrote", path)


if __name__ == "__main__":  # a local Dask cluster starts worker processes
    main()
