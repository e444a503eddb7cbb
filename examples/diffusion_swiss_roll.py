"""Kernel PCA against diffusion maps on the biased swiss roll of "Scaling Kernel Embeddings, Pt. 1".

The roll of the blog post "Scaling Kernel Embeddings, Pt. 1" (2025): 3069 draws of the roll
parameter t in [0, 9 pi] and height h in [0, 21], thinned so that inner coils and low
heights are over-represented, with Gaussian noise 0.25 (1731 points remain). Both methods
get the same Gaussian affinities ``exp(-|x - y|^2 / epsilon)``; the first coordinate is
compared with t by Spearman's rank correlation, for a range of widths epsilon, among them
the blog post's (the median squared distance, 404) and the k-NN median default of
:func:`asebo.learn.diffusion.median_knn_epsilon` (13).

Writes ``docs/figures/diffusion_swiss_roll.png`` and
``docs/figures/diffusion_swiss_roll_epsilon.png`` and prints a Markdown table.
Run: ``python examples/diffusion_swiss_roll.py`` (about a minute).
"""

import argparse
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

from asebo.learn.diffusion import DiffusionMap, KernelPCAEmbedding, median_knn_epsilon

FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"
EPSILONS = (1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 20.0, 50.0, 150.0)
SHOWN_EPSILON = 3.0


def biased_roll(random_state=69):
    """The biased swiss roll of the blog post: points (n, 3) and roll parameter t (n,)."""
    rng = np.random.RandomState(random_state)
    inner_frac, height_frac, n, noise = 0.7, 0.7, 3069, 0.25
    t_max = 9 * np.pi
    t = rng.rand(n) * t_max
    h = 21 * rng.rand(n)
    keep_t = rng.rand(n) < inner_frac * np.exp(-t / t_max) + (1 - inner_frac)
    keep_h = rng.rand(n) < height_frac * np.exp(-h / 21) + (1 - height_frac)
    t, h = t[keep_t & keep_h], h[keep_t & keep_h]
    X = np.column_stack([t * np.cos(t), h, t * np.sin(t)])  # (n, 3)
    return X + noise * rng.randn(*X.shape), t


def first_coordinate_rho(estimator, X, t):
    """|Spearman rho| between the first coordinate and the roll parameter."""
    return abs(spearmanr(estimator.fit_transform(X)[:, 0], t)[0])


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    X, t = biased_roll()
    seed_epsilon = float(np.median(pdist(X, "sqeuclidean")))
    default_epsilon = median_knn_epsilon(X)
    epsilons = sorted(set(EPSILONS) | {seed_epsilon, default_epsilon})
    methods = {
        "diffusion map, alpha = 1": lambda e: DiffusionMap(n_components=2, alpha=1.0, epsilon=e),
        "diffusion map, alpha = 0": lambda e: DiffusionMap(n_components=2, alpha=0.0, epsilon=e),
        "kernel PCA": lambda e: KernelPCAEmbedding(n_components=2, epsilon=e),
    }
    rho = {
        name: [first_coordinate_rho(make(e), X, t) for e in epsilons]
        for name, make in methods.items()
    }

    print(
        f"{len(X)} points; blog post's epsilon {seed_epsilon:.1f}, "
        f"k-NN median default {default_epsilon:.1f}\n"
    )
    print("| epsilon | " + " | ".join(methods) + " |")
    print("|---:|" + "---:|" * len(methods))
    for i, e in enumerate(epsilons):
        note = " (seed)" if e == seed_epsilon else " (default)" if e == default_epsilon else ""
        print(f"| {e:.1f}{note} | " + " | ".join(f"{rho[m][i]:.3f}" for m in methods) + " |")

    FIGURES.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in methods:
        ax.semilogx(epsilons, rho[name], "o-", label=name)
    for e, label in ((seed_epsilon, "seed"), (default_epsilon, "default")):
        ax.axvline(e, color="grey", ls=":")
        ax.text(e, 0.02, f" {label}", color="grey", rotation=90, va="bottom")
    ax.set_xlabel("Gaussian width epsilon")
    ax.set_ylabel("|Spearman rho|, first coordinate vs t")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper center", bbox_to_anchor=(0.6, 0.85), fontsize=8)
    fig.tight_layout()
    fig.savefig(FIGURES / "diffusion_swiss_roll_epsilon.png", dpi=110)

    fig = plt.figure(figsize=(12, 6.5))
    ax = fig.add_subplot(2, 3, 1, projection="3d")
    ax.scatter(X[:, 0], X[:, 1], X[:, 2], c=t, s=3)
    ax.set_title("biased swiss roll (colour: t)")
    panels = [
        ("kernel PCA", KernelPCAEmbedding, seed_epsilon, 2),
        ("diffusion map", DiffusionMap, seed_epsilon, 3),
        ("kernel PCA", KernelPCAEmbedding, SHOWN_EPSILON, 5),
        ("diffusion map", DiffusionMap, SHOWN_EPSILON, 6),
    ]
    for name, estimator, e, position in panels:
        Z = estimator(n_components=2, epsilon=e).fit_transform(X)
        ax = fig.add_subplot(2, 3, position)
        ax.scatter(Z[:, 0], Z[:, 1], c=t, s=3)
        rho_first = abs(spearmanr(Z[:, 0], t)[0])
        ax.set_title(f"{name}, epsilon = {e:.0f}: rho = {rho_first:.2f}", fontsize=10)
    fig.tight_layout()
    fig.savefig(FIGURES / "diffusion_swiss_roll.png", dpi=90)


if __name__ == "__main__":
    main()
