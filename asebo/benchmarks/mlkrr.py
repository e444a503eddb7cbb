"""KRR learning curves on QM9 atomization energies: original metric against MLKR and MLKRR.

Reproduces the QM9 experiment of Fabregat et al. ("Metric learning for kernel ridge
regression: assessment of molecular similarity", Mach. Learn.: Sci. Technol. 3, 035015
(2022), section "Results and Discussion") at a size fit for a laptop. Molecules are drawn
from the QM9 copy shipped with ``qm9pack`` (:mod:`asebo.learn.qm9`) and split into a training
pool, a test set and a validation set. Each molecule is the sum over its atoms of the
FCHL19 representation (``qmllib``, default parameters, elements H C N O F: 720
features), as in Fabregat et al. (2022); the target is the atomization energy in kcal/mol.

1. The kernel width sigma and ridge lambda of plain KRR are chosen on the test set with
   ``--metric-size`` training molecules; MLKR and MLKRR start from them (Fabregat et al. (2022),
   "Optimization details") and learn their metric, and sigma unless ``--fixed-sigma``,
   on those training molecules, which the validation set never meets.
2. For each metric and each training size N of ``--sizes``, sigma (2^0 ... 2^10 times
   the median distance in that metric) and lambda (1e-10 ... 1e-4) are chosen again
   on the test set, and the validation MAE is reported.
3. Figures (prefix ``mlkrr_``) go to ``--output``: the learning curves (Fabregat et al. (2022),
   fig. 6), 2-D PCA maps of the validation molecules in each metric coloured by the
   target (fig. 7) and the learned matrices as A - I (fig. 4).
"""

import time
import warnings
from pathlib import Path

import numpy as np

from asebo.extras import missing_extra

QM9_ELEMENTS = (1, 6, 7, 8, 9)
SIGMA_FACTORS = 2.0 ** np.arange(0, 11)  # times the median distance in the metric
LAMBDAS = (1e-10, 1e-8, 1e-6, 1e-4)


def add_arguments(parser):
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1000, 2000, 4000],
        help="training sizes N of the learning curves",
    )
    parser.add_argument(
        "--metric-size",
        type=int,
        default=8000,
        help="training molecules on which MLKR and MLKRR learn A",
    )
    parser.add_argument(
        "--iterations", type=int, default=600, help="L-BFGS iterations of MLKR and of MLKRR"
    )
    parser.add_argument(
        "--fixed-sigma",
        action="store_true",
        help="keep sigma at the plain-KRR value while learning A (default: learn it too)",
    )
    parser.add_argument(
        "--test-size", type=int, default=1000, help="molecules that choose sigma and lambda"
    )
    parser.add_argument(
        "--validation-size", type=int, default=1000, help="molecules on which the MAE is reported"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("."),
        help="folder of the figures (default: the working directory)",
    )
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")


def global_fchl19(numbers, positions):
    """Sum over atoms of the FCHL19 representation of each molecule, shape ``(n, 720)``.

    Fabregat et al. (2022), section "FCHL representation": FCHL19 (``qmllib``) with default
    parameters for the elements H, C, N, O, F, atomic vectors summed into one global
    vector per molecule, so that it does not depend on the order of the atoms.

    Parameters
    ----------
    numbers : sequence of n int arrays of shape (n_atoms_i,)
        Atomic numbers, each in :data:`QM9_ELEMENTS`.
    positions : sequence of n arrays of shape (n_atoms_i, 3)
        Coordinates in Angstrom.

    Returns
    -------
    ndarray of shape (n, 720)
    """
    from qmllib.representations import generate_fchl19

    features = []
    for z, xyz in zip(numbers, positions, strict=True):
        z = np.asarray(z)
        if not np.all(np.isin(z, QM9_ELEMENTS)):
            raise ValueError(f"global_fchl19 covers the elements {QM9_ELEMENTS}, got {z}")
        atomic = generate_fchl19(
            z, np.asarray(xyz, dtype=np.float64), elements=list(QM9_ELEMENTS)
        )  # (n_atoms, 720)
        features.append(atomic.sum(axis=0))
    return np.array(features)


def select_and_score(Z_train, y_train, Z_test, y_test, Z_val, y_val):
    """KRR with the (sigma, lambda) of the grid that is best on the test set.

    Features are already in the metric (``X A^T``); sigma runs over
    :data:`SIGMA_FACTORS` times the median training distance, lambda over
    :data:`LAMBDAS`.

    Returns
    -------
    dict
        ``mae`` (validation), ``test_mae``, ``sigma``, ``lambda``.
    """
    from scipy.linalg import cho_factor, cho_solve

    from asebo.kernels import squared_distances

    D_train = squared_distances(Z_train, Z_train)  # (N, N)
    D_test = squared_distances(Z_test, Z_train)  # (n_test, N)
    D_val = squared_distances(Z_val, Z_train)  # (n_val, N)
    median = float(np.sqrt(np.median(D_train[np.triu_indices_from(D_train, 1)])))
    offset = float(np.mean(y_train))
    best = None
    for sigma in SIGMA_FACTORS * median:
        K = np.exp(-D_train / sigma**2)
        K_test = np.exp(-D_test / sigma**2)
        for krr_lambda in LAMBDAS:
            try:
                factor = cho_factor(K + krr_lambda * np.eye(len(K)), lower=True)
            except np.linalg.LinAlgError:
                continue
            coef = cho_solve(factor, y_train - offset)  # (N,)
            test_mae = float(np.mean(np.abs(K_test @ coef + offset - y_test)))
            if best is None or test_mae < best["test_mae"]:
                best = {
                    "test_mae": test_mae,
                    "sigma": float(sigma),
                    "lambda": krr_lambda,
                    "coef": coef,
                }
    prediction = np.exp(-D_val / best["sigma"] ** 2) @ best.pop("coef") + offset
    best["mae"] = float(np.mean(np.abs(prediction - y_val)))
    return best


def run(args):
    try:  # scikit-learn, PyTorch and the estimators are imported here, not for --help
        from sklearn.exceptions import ConvergenceWarning

        from asebo.learn.mlkrr import MLKR, MLKRR
        from asebo.learn.qm9 import HARTREE_TO_KCAL_PER_MOL, load_qm9
    except ImportError as error:
        raise missing_extra(error, "learn", "asebo bench mlkrr") from error

    timings = {}
    start = time.perf_counter()
    n_pool = max(max(args.sizes), args.metric_size)
    n_total = n_pool + args.test_size + args.validation_size
    data = load_qm9().sample(n_total, random_state=args.seed)
    y = data.atomization_energy * HARTREE_TO_KCAL_PER_MOL  # (n_total,)
    X = global_fchl19(data.numbers, data.positions)  # (n_total, 720)
    test = slice(n_pool, n_pool + args.test_size)
    val = slice(n_pool + args.test_size, n_total)
    timings["data and FCHL19"] = time.perf_counter() - start

    start = time.perf_counter()
    M = args.metric_size
    plain = select_and_score(X[:M], y[:M], X[test], y[test], X[val], y[val])
    timings["plain KRR hyperparameters"] = time.perf_counter() - start
    metrics = {"original": np.eye(X.shape[1])}
    common = {
        "sigma": plain["sigma"],
        "krr_lambda": plain["lambda"],
        "learn_sigma": not args.fixed_sigma,
        "max_iter": args.iterations,
    }
    learners = {"MLKR": MLKR(**common), "MLKRR": MLKRR(**common, random_state=args.seed)}
    for name, learner in learners.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            learner.fit(X[:M], y[:M])
        metrics[name] = learner.components_
        timings[f"{name} fit ({learner.n_iter_} iterations)"] = time.perf_counter() - start

    rows = []
    for name, A in metrics.items():
        start = time.perf_counter()
        Z = X @ A.T  # (n_total, 720)
        for n in args.sizes:
            result = select_and_score(Z[:n], y[:n], Z[test], y[test], Z[val], y[val])
            rows.append({"metric": name, "N": n, **result})
        timings[f"{name} learning curve"] = time.perf_counter() - start

    table = _table(rows, args.sizes)
    args.output.mkdir(parents=True, exist_ok=True)
    _plot_learning_curves(rows, args.output / "mlkrr_learning_curves.png")
    _plot_pca(X[val], y[val], metrics, args.output / "mlkrr_pca.png")
    _plot_matrices(metrics, args.output / "mlkrr_matrices.png")
    text = "\n".join(
        [
            f"QM9, {n_total} molecules (seed {args.seed}): training pool {n_pool}, test "
            f"{args.test_size}, validation {args.validation_size}; metric learned on {M} "
            f"molecules, at most {args.iterations} L-BFGS iterations, sigma "
            f"{'fixed' if args.fixed_sigma else 'learned'}; plain KRR at N={M}: sigma "
            f"{plain['sigma']:.4g}, lambda {plain['lambda']:.0e}.",
            "",
            table,
            "",
            "| stage | seconds |",
            "| --- | ---: |",
            *[f"| {stage} | {seconds:.0f} |" for stage, seconds in timings.items()],
        ]
    )
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")


def _table(rows, sizes):
    by_key = {(r["metric"], r["N"]): r for r in rows}
    lines = [
        "| N | original MAE | MLKR MAE | MLKRR MAE | MLKR vs original | MLKRR vs original |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in sizes:
        base = by_key[("original", n)]["mae"]
        mlkr = by_key[("MLKR", n)]["mae"]
        mlkrr = by_key[("MLKRR", n)]["mae"]
        lines.append(
            f"| {n} | {base:.3f} | {mlkr:.3f} | {mlkrr:.3f} | "
            f"{100 * (mlkr / base - 1):+.1f}% | {100 * (mlkrr / base - 1):+.1f}% |"
        )
    lines.append("")
    lines.append("MAE in kcal/mol on the validation set. Chosen (sigma, lambda) per metric and N:")
    lines.append("")
    lines.append("| metric | N | sigma | lambda | test MAE |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    lines.extend(
        f"| {r['metric']} | {r['N']} | {r['sigma']:.4g} | {r['lambda']:.0e} | {r['test_mae']:.3f} |"
        for r in rows
    )
    return "\n".join(lines)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_learning_curves(rows, path):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for name, marker in (("original", "o"), ("MLKR", "s"), ("MLKRR", "^")):
        points = sorted((r["N"], r["mae"]) for r in rows if r["metric"] == name)
        ax.loglog(*zip(*points), marker=marker, label=name)
    ax.set_xlabel("training molecules N")
    ax.set_ylabel("validation MAE (kcal/mol)")
    ax.set_title("QM9 atomization energy, KRR on global FCHL19", fontsize=9)
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_pca(X, y, metrics, path):
    from sklearn.decomposition import PCA

    plt = _pyplot()

    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.6))
    for ax, (name, A) in zip(axes, metrics.items()):
        projected = PCA(n_components=2).fit_transform(X @ A.T)  # (n_val, 2)
        points = ax.scatter(*projected.T, c=y, s=4, cmap="viridis")
        ax.set_title(f"PCA, {name} metric")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(points, ax=axes, label="atomization energy (kcal/mol)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_matrices(metrics, path):
    plt = _pyplot()

    learned = {name: A for name, A in metrics.items() if name != "original"}
    fig, axes = plt.subplots(1, len(learned), figsize=(4.4 * len(learned), 3.8))
    for ax, (name, A) in zip(np.atleast_1d(axes), learned.items()):
        change = A - np.eye(len(A))  # (d, d), the identity is the starting point
        limit = float(np.percentile(np.abs(change), 99.9)) or 1.0
        image = ax.imshow(change, cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_title(f"{name}: A - I (max |A| = {np.abs(A).max():.3g})", fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
