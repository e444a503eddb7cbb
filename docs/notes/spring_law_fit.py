"""Packwood's exponent ``A`` and the scale ``mu`` of the pair springs fitted to EMT's
Hessians of rattled fcc metals (measured, not kept: docs/notes/periodic-saddles.md).

Al, Ni, Cu, Pd, Ag, Pt and Au, each as a 16-atom cubic bulk cell and a 12-atom (111)
slab, every atom rattled (``--rattle`` Å, seed 1); EMT's Hessian by central
differences. For each ``A``, each system's ``mu`` is
:func:`asebo.model.springs.fitted_spring_constant`'s least squares of the logarithms
of the Rayleigh quotients along random displacements; the spread of those logarithms
is what no ``mu`` fits. The table gives the spread (mean over the systems) and the
geometric mean of the ``mu``; then the ``A`` of the smallest summed spread::

    python docs/notes/spring_law_fit.py --rattle 0.05

``--calc gpaw`` takes the (111) slabs alone with GPAW in the users' benchmark's LCAO
settings (:data:`asebo.benchmarks.adsorbates.GPAW_PRESET`; about 5 s a call, 73 calls
a slab), ``--metals`` the elements::

    python docs/notes/spring_law_fit.py --calc gpaw --metals Cu
"""

import argparse

import numpy as np
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT
from scipy.optimize import minimize_scalar

from asebo.barrier.modes import calculator_hessian
from asebo.benchmarks.adsorbates import GPAW_PRESET
from asebo.model.springs import ExpSprings, springs_hessian


def log_quotients(atoms, hessian, exponent, samples=200, seed=0):
    """log(v^T H v) - log(v^T H_1 v) (s,) along random displacements with no
    translation, ``H_1`` the Hessian of unit springs (``mu = 1``) with ``exponent``."""
    springs = ExpSprings(atoms, spring_constant=1.0, exponent=exponent)
    unit = springs_hessian(springs, atoms.positions, np.array(atoms.cell))
    v = np.random.default_rng(seed).normal(size=(samples, len(atoms), 3))
    v = (v - v.mean(axis=1, keepdims=True)).reshape(samples, -1)  # (s, 3n)
    target = np.einsum("si,ij,sj->s", v, hessian, v)
    model = np.einsum("si,ij,sj->s", v, unit, v)
    keep = (target > 0) & (model > 0)
    return np.log(target[keep]) - np.log(model[keep])


def spread_and_scale(systems, exponent):
    """The mean spread of the log quotients and the geometric mean of the ``mu``."""
    logs = [log_quotients(atoms, hessian, exponent) for atoms, hessian in systems]
    return np.mean([np.std(x) for x in logs]), np.exp(np.mean([np.mean(x) for x in logs]))


parser = argparse.ArgumentParser()
parser.add_argument("--rattle", type=float, default=0.05)
parser.add_argument("--calc", choices=("emt", "gpaw"), default="emt")
parser.add_argument("--metals", nargs="+", default=["Al", "Ni", "Cu", "Pd", "Ag", "Pt", "Au"])
args = parser.parse_args()

systems = []
for metal in args.metals:
    slab = fcc111(metal, size=(2, 2, 3), vacuum=6.0)
    for atoms in (
        (slab,) if args.calc == "gpaw" else (bulk(metal, cubic=True).repeat((2, 2, 1)), slab)
    ):
        atoms.rattle(args.rattle, seed=1)
        free = np.ones((len(atoms), 3), dtype=bool)
        if args.calc == "gpaw":
            from calculators import get_calculator

            calculator = get_calculator(GPAW_PRESET)
        else:
            calculator = EMT()
        systems.append((atoms, calculator_hessian(atoms, calculator, free)))

print("| A | spread of the log quotients (mean over systems) | mu (eV/Å², geometric mean) |")
print("|---|---|---|")
for exponent in (3.0, 6.0, 9.0, 12.0, 15.0, 20.0):
    spread, scale = spread_and_scale(systems, exponent)
    print(f"| {exponent:g} | {spread:.4f} | {scale:.2f} |")
best = minimize_scalar(
    lambda a: spread_and_scale(systems, a)[0], bounds=(1.0, 30.0), method="bounded"
).x
print(f"\nsmallest spread: A = {best:.2f}, mu = {spread_and_scale(systems, best)[1]:.2f} eV/Å²")
