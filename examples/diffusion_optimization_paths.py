"""A diffusion map of the configurations that BOOptimizer and L-BFGS visit.

Relaxes methanol with GFN2-xTB from 40 perturbed starts (sigma 0.1 Å, seeded) with
each optimizer, collects every configuration they evaluate, and embeds them all
with a diffusion map on the SVD kernel (rotation and translation invariant, so
paths that differ by a rigid motion fall on each other). Writes
``docs/figures/diffusion_optimization_paths.png`` and prints the
number of configurations, the embedding's two leading eigenvalues and each optimizer's
mean and median force calls per run.
"""

import argparse
from pathlib import Path

import matplotlib
import numpy as np
from ase.build import molecule
from ase.optimize import LBFGS

from asebo import BOOptimizer
from asebo.kernels import SVDKernel, svd_distance
from asebo.learn.diffusion import DiffusionMap
from calculators import get_calculator

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STARTS, NOISE, SEED = 40, 0.1, 0
OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "figures"


def paths(optimizer, starts):
    """Every evaluated configuration of each run: a list of (k, n, 3) arrays."""
    runs = []
    for start in starts:
        atoms = molecule("CH3OH")
        atoms.positions = start
        atoms.calc = get_calculator("gfn2")
        frames = []
        opt = optimizer(atoms, logfile=None)
        opt.attach(lambda frames=frames, atoms=atoms: frames.append(atoms.get_positions()))
        opt.run(fmax=0.05, steps=100)
        runs.append(np.array(frames))
    return runs


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    rng = np.random.default_rng(SEED)
    reference = molecule("CH3OH").positions
    starts = [reference + NOISE * rng.normal(size=reference.shape) for _ in range(STARTS)]
    runs = {"BOOptimizer": paths(BOOptimizer, starts), "L-BFGS": paths(LBFGS, starts)}
    frames = np.concatenate([np.concatenate(r) for r in runs.values()])  # (N, n, 3)
    d = svd_distance(frames[:, None], frames[None, :])
    epsilon = float(np.median(d))  # k = exp(-d / epsilon): gamma = 2 / epsilon
    embedding = DiffusionMap(
        n_components=2, kernel=SVDKernel(gamma=2.0 / epsilon), random_state=SEED
    ).fit(frames.reshape(len(frames), -1))
    coordinates = embedding.transform(frames.reshape(len(frames), -1))
    print("configurations:", len(frames), "eigenvalues:", embedding.eigenvalues_)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharex=True, sharey=True)
    offset = 0
    for ax, (name, runs_of) in zip(axes, runs.items()):
        calls = [len(r) for r in runs_of]
        for run in runs_of:
            path = coordinates[offset : offset + len(run)]
            ax.plot(path[:, 0], path[:, 1], "-", lw=0.6, alpha=0.6)
            ax.plot(path[-1, 0], path[-1, 1], "k.", ms=3)
            offset += len(run)
        ax.set_title(f"{name}: {np.mean(calls):.1f} calls per run (mean)")
        ax.set_xlabel("diffusion coordinate 1")
        print(f"{name}: mean calls {np.mean(calls):.1f}, median {np.median(calls):.0f}")
    axes[0].set_ylabel("diffusion coordinate 2")
    fig.suptitle(
        "Methanol, GFN2-xTB, 40 perturbed starts: every evaluated configuration, "
        "SVD-kernel diffusion map"
    )
    fig.tight_layout()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUTPUT / "diffusion_optimization_paths.png", dpi=120)


if __name__ == "__main__":
    main()
