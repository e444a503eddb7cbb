"""Relax an adsorbate on a metal slab and a strained bulk cell with GPAW: BOOptimizer
against ASE's BFGS and GPMin.

Two small periodic problems through the ``gpaw`` calculator preset
(:class:`calculators.CellAwareGPAW`), each relaxed from the same start by every
optimizer to ``--fmax`` (0.05 eV/Å by default), with a fresh calculator per run:

- ``slab``: O on the fcc hollow site of a 2x2 Al(111) slab of two layers,
  ``pbc=(True, True, False)`` with 5 Å of vacuum on each side, the bottom layer fixed
  (``FixAtoms``): 4 Al and the O move. PBE in LCAO mode with the single-zeta part of
  the dzp basis (``--basis``), grid spacing 0.25 Å, 3x3x1 k-points (``--kpts``) and
  Fermi-Dirac smearing of 0.1 eV. The O starts 1.6 Å above the surface and 0.3 Å off
  the hollow site, and the top layer is rattled by 0.05 Å.
- ``cell``: fcc Al in its one-atom cell, started 4 % compressed along one axis and
  sheared by 2 %, relaxed with ``FrechetCellFilter`` (positions and cell together;
  the atom has no force, the cell's virial does the work), in plane waves
  (``ecut=300`` eV, 6x6x6 k-points), the mode in which GPAW gives the stress.

For each run the script prints the force calls (configurations GPAW computed), whether
it converged, the final free energy (the energy whose gradient the forces are, with
smearing) and the largest remaining force; for ``cell`` also the lattice constant of
the relaxed cell (the cube root of 4 V for fcc). ``--part slab`` runs the slab only.

    python examples/gpaw_periodic.py --part slab
    python examples/gpaw_periodic.py --part cell --optimizers bfgs gpmin

On 2 cores the slab part takes a few minutes (about 1-3 s a force call); the cell
part about a minute.
"""

import argparse
import time

import numpy as np
from ase.build import add_adsorbate, bulk, fcc111
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter
from ase.optimize import BFGS, GPMin

from asebo import BOOptimizer
from calculators import CountingCalculator, get_calculator

OPTIMIZERS = {"bo": BOOptimizer, "bfgs": BFGS, "gpmin": GPMin}
AL_LATTICE = 4.04  # Å: PBE lattice constant of Al
CELL_PRESET = "gpaw:mode=pw,ecut=300,kpts=6"


def oxygen_on_aluminium_111(seed=0):
    """O above the fcc hollow of a two-layer 2x2 Al(111) slab, the bottom layer fixed."""
    slab = fcc111("Al", size=(2, 2, 2), a=AL_LATTICE, vacuum=5.0)
    add_adsorbate(slab, "O", 1.6, "fcc")
    slab.center(vacuum=5.0, axis=2)
    slab.set_constraint(FixAtoms(indices=[atom.index for atom in slab if atom.tag == 2]))
    top = [atom.index for atom in slab if atom.tag == 1]
    rng = np.random.default_rng(seed)
    slab.positions[top] += rng.normal(scale=0.05, size=(len(top), 3))
    slab.positions[-1, :2] += [0.3, 0.0]
    return slab


def strained_aluminium():
    """fcc Al, 4 % compressed along x and sheared by 2 % in xy."""
    atoms = bulk("Al", "fcc", a=AL_LATTICE)
    deformation = np.eye(3)
    deformation[0, 0] -= 0.04
    deformation[0, 1] += 0.02
    atoms.set_cell(atoms.cell @ deformation, scale_atoms=True)
    return atoms


def relax(atoms, optimizer, calc, fmax, steps, cell):
    """Relax ``atoms`` (and their cell when ``cell``); the row of the summary table."""
    counter = CountingCalculator(calc)
    atoms.calc = counter
    target = FrechetCellFilter(atoms) if cell else atoms
    start = time.perf_counter()
    converged = OPTIMIZERS[optimizer](target, logfile=None).run(fmax=fmax, steps=steps)
    forces = target.get_forces()  # (n, 3), with the cell's rows under the filter
    row = {
        "optimizer": optimizer,
        "calls": counter.ncalls,
        "converged": bool(converged),
        "free_energy": atoms.get_potential_energy(force_consistent=True),
        "fmax": float(np.linalg.norm(forces, axis=1).max()),
        "seconds": time.perf_counter() - start,
    }
    if cell:
        row["lattice"] = float(np.cbrt(4 * atoms.get_volume()))
    return row


def print_table(title, rows):
    print(f"\n{title}")
    lowest = min(row["free_energy"] for row in rows)
    header = f"{'optimizer':<10}{'calls':>6}{'conv.':>7}{'F (eV)':>13}{'F - min':>10}{'fmax':>8}"
    extra = "a (Å)" if "lattice" in rows[0] else ""
    print(header + f"{extra:>8}{'time (s)':>10}")
    for row in rows:
        line = (
            f"{row['optimizer']:<10}{row['calls']:>6}{'yes' if row['converged'] else 'no':>7}"
            f"{row['free_energy']:>13.4f}{row['free_energy'] - lowest:>10.4f}{row['fmax']:>8.3f}"
        )
        lattice = f"{row['lattice']:>8.3f}" if "lattice" in row else ""
        print(line + lattice + f"{row['seconds']:>10.0f}", flush=True)


def positive(convert):
    """An argparse type: ``convert`` of the text, refused unless finite and above 0."""

    def parse(text):
        value = convert(text)
        if not np.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
        return value

    return parse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("slab", "cell", "all"), default="all")
    parser.add_argument("--optimizers", nargs="+", choices=OPTIMIZERS, default=list(OPTIMIZERS))
    parser.add_argument("--fmax", type=positive(float), default=0.05, help="eV/Å")
    parser.add_argument("--steps", type=positive(int), default=100)
    parser.add_argument("--basis", default="sz(dzp)", help="LCAO basis of the slab")
    parser.add_argument("--kpts", type=int, default=3, help="k-points along x and y (slab)")
    args = parser.parse_args()

    parts = {
        "slab": (
            "O on Al(111) 2x2, two layers, bottom fixed",
            oxygen_on_aluminium_111,
            f"gpaw:basis={args.basis},h=0.25,kpts={args.kpts}",
        ),
        "cell": ("Al bulk, strained, FrechetCellFilter", strained_aluminium, CELL_PRESET),
    }
    for part, (title, build, preset) in parts.items():
        if args.part not in (part, "all"):
            continue
        cell = part == "cell"
        rows = [
            relax(build(), name, get_calculator(preset), args.fmax, args.steps, cell)
            for name in args.optimizers
        ]
        print_table(f"{title} ({preset})", rows)


if __name__ == "__main__":
    main()
