"""Energy prediction with the SVD kernel: RMSE by nested cross-validation and learning curves.

Reproduces the study of Wong and Kolter (Tables 1-2, Fig. 1): a set of displaced
configurations of one molecule (``asebo/data`` or the cache, computed if missing),
outer k-fold cross-validation of the mean predictor, KRR on Coulomb eigenspectra,
the SVD kernel on energies and the SVD kernel with derivatives, hyperparameters by
an inner 4-fold cross-validation on RMSE (the paper) and by the marginal likelihood
(suffix ``_ml``), and learning curves (RMSE against training configurations).

    asebo bench prediction --molecule glycerol --calc gfn2 --configs 100 --json out.json

``--json`` writes ``{model: mean RMSE (eV)}``; ``--details`` everything else (per
fold RMSE, chosen hyperparameters, times, curves); ``--plot`` the learning curves.
"""

import json
import time

import numpy as np

from asebo.benchmarks._options import _argument_type, positive_int

MODEL_NAMES = ("mean", "eigenspectrum", "svd", "svd_deriv")  # the keys of MODELS
_training_size = _argument_type(int, lambda value: value >= 2, "a whole number of 2 or more")
"""A learning-curve size (``--sizes``): the inner cross-validation needs 2 configurations."""


def add_arguments(parser):
    parser.add_argument(
        "--molecule", default="glycerol", help="water, glycerol, nonanol or a SMILES string"
    )
    parser.add_argument(
        "--calc", default="gfn2", help="calculator preset: gfn2, gpaw, gpaw:mode=lcao, emt ..."
    )
    parser.add_argument("--configs", type=positive_int, default=100)
    parser.add_argument(
        "--displacement",
        type=float,
        default=None,
        help="noise standard deviation in Å (default per molecule)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=list(MODEL_NAMES))
    parser.add_argument(
        "--selection",
        nargs="+",
        default=["cv", "ml"],
        choices=["cv", "ml"],
        help="cv: inner cross-validation on RMSE (the paper); ml: marginal likelihood",
    )
    parser.add_argument("--folds", type=int, default=5, help="outer folds")
    parser.add_argument("--inner-folds", type=int, default=4)
    parser.add_argument(
        "--sizes",
        type=_training_size,
        nargs="*",
        default=[5, 10, 20, 40],
        help="training sizes of the learning curves, 2 or more (the full training "
        "size is added, larger ones are dropped); none: no curves",
    )
    parser.add_argument(
        "--curve-models",
        nargs="*",
        default=["mean", "svd", "svd_deriv"],
        choices=list(MODEL_NAMES),
    )
    parser.add_argument(
        "--solver",
        default="cholesky",
        choices=["cholesky", "cg"],
        help="linear solver of the final fits of the derivative model",
    )
    parser.add_argument(
        "--cg-tolerance", type=float, default=1e-6, help="relative residual at which CG stops"
    )
    parser.add_argument("--cg-max-iter", type=int, default=5000, help="most CG iterations of a fit")
    parser.add_argument(
        "--search-configs",
        type=positive_int,
        default=None,
        help="choose hyperparameters on at most this many training configurations (default: all)",
    )
    parser.add_argument(
        "--screen",
        type=positive_int,
        default=None,
        help="cross-validate only this many grid points (without lam) on "
        "all inner folds: the best on the first inner fold (default: all; "
        "--selection ml ignores it)",
    )
    parser.add_argument(
        "--deriv-grid",
        nargs="+",
        metavar="KEY=V1,V2",
        help="grid of the derivative model, e.g. gamma_factor=0.1,0.3 "
        "lam=1e-4 lam_deriv=1e-2 (default: asebo.learn.prediction.DEFAULT_GRIDS)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument(
        "--no-generate",
        action="store_true",
        help="fail instead of computing missing configurations",
    )
    parser.add_argument("--json", help="write {model: RMSE} here")
    parser.add_argument("--details", help="write all results here (JSON)")
    parser.add_argument("--plot", help="write the learning curves here (PNG)")


def _summary(results):
    rmse = np.array([r.rmse for r in results])
    return {
        "rmse": float(rmse.mean()),
        "std": float(rmse.std()),
        "folds": rmse.tolist(),
        "params": [r.params for r in results],
        "search_seconds": float(sum(r.search_seconds for r in results)),
        "fit_seconds": float(sum(r.fit_seconds for r in results)),
        "search_cpu_seconds": float(sum(r.search_cpu_seconds for r in results)),
        "fit_cpu_seconds": float(sum(r.fit_cpu_seconds for r in results)),
        "training_size": results[0].training_size,
        "solver": [r.solver for r in results if r.solver],
    }


def _parse_grid(items):
    """``["gamma_factor=0.1,0.3", "lam=1e-4"]`` -> ``{"gamma_factor": [0.1, 0.3], ...}``."""
    if not items:
        return None
    grid = {}
    for item in items:
        key, _, values = item.partition("=")
        if not values:
            raise ValueError(f"--deriv-grid takes KEY=V1,V2 items, got {item!r}")
        grid[key] = [float(v) for v in values.split(",")]
    missing = {"gamma_factor", "lam", "lam_deriv"} - set(grid)
    if missing:
        raise ValueError(f"--deriv-grid needs values for {', '.join(sorted(missing))}")
    return grid


def _evaluate(data, name, selection, folds, args, training_size=None):
    from asebo.learn.prediction import evaluate_model

    options, grid = {}, None
    if name == "svd_deriv":
        options = {
            "solver": args.solver,
            "cg_tolerance": args.cg_tolerance,
            "cg_max_iter": args.cg_max_iter,
        }
        grid = _parse_grid(args.deriv_grid)
    return evaluate_model(
        data,
        name,
        selection,
        folds,
        training_size,
        inner_folds=args.inner_folds,
        grid=grid,
        search_configs=args.search_configs,
        screen=args.screen,
        random_state=args.seed,
        **options,
    )


def _plot(path, curves, data, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "mean": "mean predictor",
        "eigenspectrum": "Coulomb eigenspectrum",
        "svd": "SVD kernel",
        "svd_deriv": "SVD kernel with derivatives",
    }
    figure, axes = plt.subplots(figsize=(5.5, 3.8))
    for name, curve in curves.items():
        sizes = sorted(curve)
        rmse = np.array([curve[s] for s in sizes])  # (sizes, folds)
        axes.errorbar(
            sizes,
            rmse.mean(1),
            yerr=rmse.std(1),
            marker="o",
            capsize=3,
            label=labels.get(name, name),
            linestyle="--" if name == "mean" else "-",
        )
    axes.set_xlabel("training configurations")
    axes.set_ylabel("RMSE of the energy (eV)")
    axes.set_title(
        f"{args.molecule}, {args.calc}: {len(data)} configurations, {args.folds}-fold CV",
        fontsize=10,
    )
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(args):
    # PyTorch and the models are imported here, not for --help
    import torch

    from asebo.learn.prediction import configuration_folds, load_dataset

    torch.set_num_threads(args.threads)
    start, cpu_start = time.perf_counter(), time.process_time()
    data = load_dataset(
        args.molecule,
        args.calc,
        args.configs,
        args.displacement,
        args.seed,
        cache_dir=args.cache_dir,
        generate=not args.no_generate,
        progress=True,
    )
    generated = time.perf_counter() - start
    print(
        f"{args.molecule} ({len(data.numbers)} atoms), {args.calc}: {len(data)} "
        f"configurations, energy std {data.energies.std():.4f} eV ({generated:.1f} s)"
    )
    folds = configuration_folds(len(data), args.folds, args.seed)
    table = {}
    print(
        f"{'model':<18} {'RMSE (eV)':>18} {'search s':>9} {'fit s':>8} "
        f"{'search CPU s':>13} {'fit CPU s':>10}"
    )
    for name in args.models:
        for selection in ["cv"] if name == "mean" else args.selection:
            key = name if selection == "cv" else f"{name}_ml"
            table[key] = _summary(_evaluate(data, name, selection, folds, args))
            row = table[key]
            print(
                f"{key:<18} {row['rmse']:9.4f} ± {row['std']:6.4f} "
                f"{row['search_seconds']:9.1f} {row['fit_seconds']:8.1f} "
                f"{row['search_cpu_seconds']:13.1f} {row['fit_cpu_seconds']:10.1f}",
                flush=True,
            )
    curves = {}
    full = len(data) - max(len(test) for _, test in folds)
    sizes = sorted({s for s in args.sizes if s < full})
    for name in args.curve_models if sizes else []:
        curves[name] = {}
        for size in sizes:
            curves[name][size] = [r.rmse for r in _evaluate(data, name, "cv", folds, args, size)]
            rmse = np.array(curves[name][size])
            print(
                f"curve {name:<13} {size:4d} configurations: {rmse.mean():.4f} ± {rmse.std():.4f}",
                flush=True,
            )
        if name in table:
            curves[name][table[name]["training_size"]] = table[name]["folds"]
    total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"total {total:.1f} s wall, {cpu:.1f} s CPU")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({key: row["rmse"] for key, row in table.items()}, handle, indent=1)
    if args.details:
        details = {
            "molecule": args.molecule,
            "calculator": args.calc,
            "configs": len(data),
            "n_atoms": len(data.numbers),
            "energy_std": float(data.energies.std()),
            "metadata": data.metadata,
            "folds": args.folds,
            "inner_folds": args.inner_folds,
            "solver": args.solver,
            "search_configs": args.search_configs,
            "screen": args.screen,
            "deriv_grid": args.deriv_grid,
            "seconds": total,
            "cpu_seconds": cpu,
            "models": table,
            "curves": {name: {str(s): v for s, v in c.items()} for name, c in curves.items()},
        }
        with open(args.details, "w") as handle:
            json.dump(details, handle, indent=1)
    if args.plot and curves:
        _plot(args.plot, curves, data, args)
