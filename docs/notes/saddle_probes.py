"""How many calls it takes to find the target's lowest mode at a transition-state
guess, with the GP of :class:`asebo.saddle.BOSaddle` as the preconditioner.

At each guess of Baker and Chan (GFN2-xTB) the target's Hessian is computed by central
differences (not counted), then a Davidson iteration runs on the target: each probe is
one call at ``PROBE`` Å along a unit direction from the guess, whose force change gives
the target's Hessian times that direction; the Ritz pair of the lowest curvature in the
probed directions stops the iteration once its residual is below ``GAMMA`` times the
curvature (Sella's iterative eigensolver's criterion). The next direction is the
residual preconditioned by the GP's Hessian at the guess (the GP fitted to the guess and
every probe, Lindh prior, internal coordinates), the first the GP's lowest mode. Printed
per guess: the probes, the lowest curvature of the target, and after each probe the
overlap of the GP's lowest mode with the target's.

    python docs/notes/saddle_probes.py 01_hcn 04_ch3o 14_vinyl_alcohol
"""

import sys

import numpy as np

from asebo.benchmarks._endpoint_audit import finite_difference_hessian
from asebo.benchmarks.ts import guess
from asebo.optimize.build import build_surrogate
from asebo.optimize.model_hessian import internal_basis, posterior_hessian
from asebo.optimize.observations import Observations
from calculators import get_calculator

PROBE = 0.01  # Å
GAMMA = 0.1
MOST = 15  # probes at most


def probes(name):
    """(probes, target's lowest curvature, overlaps of the GP's lowest mode)."""
    atoms = guess(name)
    calc = get_calculator("gfn2")
    start = atoms.positions.copy()  # (n, 3)
    n = len(atoms)
    free = np.ones((n, 3), dtype=bool)
    basis = internal_basis(start, free)  # (3n, k)
    target = basis.T @ finite_difference_hessian(atoms, calc) @ basis
    values, vectors = np.linalg.eigh(target)
    lowest = basis @ vectors[:, 0]
    coordinates = {"numbers": atoms.numbers, "periodic": False}
    surrogate, _, _ = build_surrogate(atoms, coordinates, 3 * n)
    record = Observations(atoms.numbers, None, None)

    def gradient(positions):
        probe = atoms.copy()
        probe.calc = calc
        probe.positions = positions
        record.append(positions.copy(), probe.get_potential_energy(), probe.get_forces())
        return -record.forces[-1].ravel()

    at_start = gradient(start)
    directions, products, overlaps = [], [], []
    while len(directions) < MOST:
        gp, _ = surrogate.fitted(record)
        model = basis.T @ posterior_hessian(gp, start, free) @ basis
        model_values, model_vectors = np.linalg.eigh(model)
        overlaps.append(abs(basis @ model_vectors[:, 0] @ lowest))
        if directions:
            probed, product = np.array(directions).T, np.array(products).T  # (3n, p)
            small = probed.T @ product
            ritz_values, ritz_vectors = np.linalg.eigh(0.5 * (small + small.T))
            theta, ritz = ritz_values[0], probed @ ritz_vectors[:, 0]
            residual = basis @ (basis.T @ (product @ ritz_vectors[:, 0] - theta * ritz))
            if np.linalg.norm(residual) < GAMMA * abs(theta):
                break
            shifted = model - theta * np.eye(len(model)) + 1e-6 * np.eye(len(model))
            direction = basis @ np.linalg.solve(shifted, basis.T @ residual)
            for _ in range(2):
                direction -= probed @ (probed.T @ direction)
        else:
            direction = basis @ model_vectors[:, 0]
        direction /= np.linalg.norm(direction)
        directions.append(direction)
        moved = gradient(start + PROBE * direction.reshape(n, 3))
        products.append((moved - at_start) / PROBE)
    return len(directions), values[0], overlaps


if __name__ == "__main__":
    for name in sys.argv[1:]:
        count, curvature, overlaps = probes(name)
        trail = " ".join(f"{o:.2f}" for o in overlaps)
        print(f"{name}: {count} probes, lowest curvature {curvature:.2f} eV/Å², overlaps {trail}")
