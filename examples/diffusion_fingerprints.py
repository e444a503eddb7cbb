"""Nyström diffusion maps against kernel PCA on QM9 fingerprints, judged by a classifier.

The molecule experiment of the blog post "Scaling Kernel Embeddings, Pt. 1" (2025), on QM9
instead of MoleculeNet's HIV set: Morgan fingerprints (RDKit, radius 2, 2048 bits) under the
Tanimoto kernel, approximated by Nyström with 2000 landmarks drawn uniformly; embeddings by
diffusion maps (alpha = 1 and alpha = 0, t = 1) and by kernel PCA on the same landmarks; a
logistic regression on the first d coordinates (standardised) predicts whether the HOMO-LUMO
gap is above the median of the training molecules; test ROC AUC for each d.

Unlike the blog post, which embeds training and test molecules together, the embedding is
fitted on the training molecules only and the test molecules are placed by the
Nyström extension (``transform``).

Writes ``docs/figures/diffusion_fingerprints_auc.png`` and
``docs/figures/diffusion_fingerprints_map.png`` and prints a Markdown table.
Run: ``python examples/diffusion_fingerprints.py`` (a few minutes; most of it reading
QM9 and computing fingerprints).
"""

import argparse
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from asebo.benchmarks.diffusion import qm9_fingerprints
from asebo.kernels import TanimotoKernel
from asebo.learn.diffusion import DiffusionMap, KernelPCAEmbedding
from asebo.learn.qm9 import HARTREE_TO_EV

FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"
N_MOLECULES = 20_000
TEST_FRACTION = 0.2
N_LANDMARKS = 2000
DIMENSIONS = (2, 8, 32, 128, 512)
SEED = 0


def classifier_auc(Z_train, y_train, Z_test, y_test):
    """ROC AUC of a standardised logistic regression trained on Z_train."""
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
    return roc_auc_score(y_test, model.fit(Z_train, y_train).decision_function(Z_test))


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    bits, gap = qm9_fingerprints(N_MOLECULES, random_state=SEED)
    n_test = int(TEST_FRACTION * N_MOLECULES)
    train, test = slice(n_test, None), slice(None, n_test)
    threshold = np.median(gap[train])
    label = gap > threshold  # (n,) above the training median
    common = dict(
        n_components=max(DIMENSIONS),
        kernel=TanimotoKernel(),
        n_landmarks=N_LANDMARKS,
        random_state=SEED,
    )
    methods = {
        "diffusion map, alpha = 1": DiffusionMap(alpha=1.0, **common),
        "diffusion map, alpha = 0": DiffusionMap(alpha=0.0, **common),
        "kernel PCA": KernelPCAEmbedding(**common),
    }
    embeddings, auc = {}, {}
    for name, estimator in methods.items():
        Z_train = estimator.fit_transform(bits[train])
        Z_test = estimator.transform(bits[test])
        embeddings[name] = Z_train
        auc[name] = [
            classifier_auc(Z_train[:, :d], label[train], Z_test[:, :d], label[test])
            for d in DIMENSIONS
        ]

    print(
        f"QM9: {N_MOLECULES - n_test} training and {n_test} test molecules, "
        f"{N_LANDMARKS} landmarks; median gap {threshold:.4f} Ha\n"
    )
    print("| coordinates | " + " | ".join(methods) + " |")
    print("|---:|" + "---:|" * len(methods))
    for i, d in enumerate(DIMENSIONS):
        print(f"| {d} | " + " | ".join(f"{auc[m][i]:.3f}" for m in methods) + " |")

    FIGURES.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name in methods:
        ax.semilogx(DIMENSIONS, auc[name], "o-", label=name)
    ax.set_xticks(DIMENSIONS, [str(d) for d in DIMENSIONS])
    ax.set_xlabel("embedding coordinates given to the classifier")
    ax.set_ylabel("test ROC AUC, gap above median")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(FIGURES / "diffusion_fingerprints_auc.png", dpi=110)

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    shown = np.random.default_rng(SEED).permutation(N_MOLECULES - n_test)[:5000]
    for ax, (name, Z) in zip(axes, embeddings.items()):
        points = ax.scatter(
            Z[shown, 0], Z[shown, 1], c=gap[train][shown] * HARTREE_TO_EV, s=2, cmap="viridis"
        )
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("coordinate 1")
        ax.set_ylabel("coordinate 2")
    fig.colorbar(points, ax=axes, label="HOMO-LUMO gap (eV)")
    fig.savefig(FIGURES / "diffusion_fingerprints_map.png", dpi=90)


if __name__ == "__main__":
    main()
