"""Structured against dense products with the joint SVD-kernel covariance.

For each size, a fresh process builds the joint covariance of ``m`` configurations
of an ``n``-atom molecule, times the structured product with one vector through the
public ``op @ v`` that callers use (median of repeats) and, where the dense matrix
fits in ``--dense-limit-gib``, the dense product with the same vector; it reports
the peak resident memory of the structured run and of the dense run.
"""

import multiprocessing
import resource
import time

import numpy as np


def add_arguments(parser):
    parser.add_argument("--atoms", type=int, nargs="+", default=[10, 30, 100, 300])
    parser.add_argument("--configs", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--dense-limit-gib",
        type=float,
        default=3.0,
        help="skip the dense product above this matrix size",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both products (small products lose to "
        "thread start-up on a busy machine)",
    )


def _random_configurations(n_atoms, m, seed):
    import torch

    rng = np.random.default_rng(seed)
    base = rng.normal(scale=n_atoms ** (1 / 3), size=(n_atoms, 3))
    return torch.tensor(base + 0.1 * rng.normal(size=(m, n_atoms, 3)))


def _median_time(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _peak_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _measure(n_atoms, m, repeats, dense, seed, threads, queue):
    # PyTorch is imported in the measuring process, not for --help
    import torch

    from asebo.kernels import joint_covariance

    torch.set_num_threads(threads)
    positions = _random_configurations(n_atoms, m, seed)
    op = joint_covariance(positions, gamma=1.0 / n_atoms)
    vector = torch.randn(
        op.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
    )
    structured = _median_time(lambda: op @ vector, repeats)
    result = {"structured_s": structured, "structured_gib": _peak_gib()}
    if dense:
        matrix = op.to_dense()
        result["dense_s"] = _median_time(lambda: matrix @ vector, repeats)
        result["dense_gib"] = _peak_gib()
        result["max_error"] = float(
            (matrix @ vector - op @ vector).abs().max() / (matrix @ vector).abs().max()
        )
    queue.put(result)


def measure(n_atoms, m, repeats=5, dense_limit_gib=3.0, seed=0, threads=1):
    """Times and peak memory of one size, measured in a fresh process."""
    size = m * (3 * n_atoms + 1)
    dense = size**2 * 8 / 2**30 <= dense_limit_gib
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(
        target=_measure, args=(n_atoms, m, repeats, dense, seed, threads, queue)
    )
    process.start()
    result = queue.get()
    process.join()
    return {"n": n_atoms, "m": m, "size": size, **result}


def run(args):
    header = (
        f"{'n':>4} {'m':>4} {'size':>7} {'structured ms':>14} {'dense ms':>10} "
        f"{'ratio':>7} {'peak GiB (structured)':>22} {'peak GiB (dense)':>17}"
    )
    print(header)
    for n_atoms in args.atoms:
        for m in args.configs:
            r = measure(n_atoms, m, args.repeats, args.dense_limit_gib, args.seed, args.threads)
            dense_ms = f"{1e3 * r['dense_s']:10.2f}" if "dense_s" in r else f"{'-':>10}"
            ratio = f"{r['dense_s'] / r['structured_s']:7.1f}" if "dense_s" in r else f"{'-':>7}"
            dense_gib = f"{r['dense_gib']:17.2f}" if "dense_gib" in r else f"{'-':>17}"
            print(
                f"{n_atoms:4d} {m:4d} {r['size']:7d} {1e3 * r['structured_s']:14.2f} "
                f"{dense_ms} {ratio} {r['structured_gib']:22.2f} {dense_gib}",
                flush=True,
            )
