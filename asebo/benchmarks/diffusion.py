"""Diffusion maps at scale: Nyström embedding of QM9 Morgan fingerprints, Tanimoto kernel.

Draws ``--molecules`` molecules of QM9 (:mod:`asebo.learn.qm9`), computes their Morgan
fingerprints (RDKit, radius 2, 2048 bits, stored as uint8), and fits
:class:`asebo.learn.diffusion.DiffusionMap` with the Tanimoto kernel and ``--landmarks`` landmarks
(the Nyström approximation of the blog post "Scaling Kernel Embeddings, Pt. 1", 2025). It
reports the wall and CPU time of the fit, the peak memory allocated during the fit
(``tracemalloc``, which sees numpy's buffers) and the process's peak resident memory, then
the time to place
``--new-molecules`` further molecules by the Nyström extension (``transform``).
With ``--kpca`` it also times :class:`asebo.learn.diffusion.KernelPCAEmbedding` on the same
data. The kernel is evaluated a block of rows at a time; the n x m landmark kernel
matrix (8 n m bytes) is the one large array.

Featurisation (reading QM9, RDKit) is timed apart: it is not part of the embedding.
Set ``OMP_NUM_THREADS`` to fix the number of BLAS threads.
"""

import os
import resource
import time
import tracemalloc

import numpy as np


def add_arguments(parser):
    parser.add_argument(
        "--molecules",
        type=int,
        default=100_000,
        help="molecules to embed (default 100000; QM9 has 130831)",
    )
    parser.add_argument(
        "--landmarks", type=int, default=2000, help="Nyström landmarks (default 2000)"
    )
    parser.add_argument(
        "--components", type=int, default=10, help="diffusion coordinates (default 10)"
    )
    parser.add_argument(
        "--new-molecules",
        type=int,
        default=10_000,
        help="further molecules placed by transform (default 10000)",
    )
    parser.add_argument(
        "--kpca", action="store_true", help="also time kernel PCA on the same landmarks"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def fingerprint_bits(smiles, radius=2, n_bits=2048):
    """Morgan fingerprints of SMILES strings as a dense 0/1 array.

    Parameters
    ----------
    smiles : sequence of str
    radius : int
        Morgan radius (2 is ECFP4, as in "Scaling Kernel Embeddings, Pt. 1").
    n_bits : int

    Returns
    -------
    ndarray of shape (n, n_bits), uint8
        One byte a bit: 8 times less memory than float64; the Tanimoto kernel converts
        a block of rows at a time.
    """
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdFingerprintGenerator

    RDLogger.DisableLog("rdApp.*")
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    bits = np.zeros((len(smiles), n_bits), dtype=np.uint8)  # (n, n_bits)
    for i, text in enumerate(smiles):
        molecule = Chem.MolFromSmiles(text)
        if molecule is None:
            raise ValueError(f"RDKit cannot parse SMILES {text!r} (molecule {i})")
        bits[i] = generator.GetFingerprintAsNumPy(molecule)
    return bits


def qm9_fingerprints(n_molecules, random_state=0, radius=2, n_bits=2048):
    """Morgan fingerprints and HOMO-LUMO gaps of randomly drawn QM9 molecules.

    Returns
    -------
    bits : ndarray of shape (n_molecules, n_bits), uint8
    gap : ndarray of shape (n_molecules,), float64
        HOMO-LUMO gap in Hartree.
    """
    from asebo.learn.qm9 import load_qm9

    molecules = load_qm9().sample(n_molecules, random_state=random_state)
    return fingerprint_bits(molecules.smiles, radius, n_bits), np.array(molecules.homo_lumo_gap)


def _measure(action, *args):
    """Run ``action(*args)``; return its result, wall and CPU seconds, peak traced bytes."""
    tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    result = action(*args)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, wall, cpu, peak


def run(args):
    # PyTorch, scikit-learn and the estimators are imported here, not for --help
    from asebo.kernels import TanimotoKernel
    from asebo.learn.diffusion import DiffusionMap, KernelPCAEmbedding

    if args.molecules < args.landmarks or args.new_molecules < 0:
        raise SystemExit("need --molecules >= --landmarks and --new-molecules >= 0")
    start = time.perf_counter()
    bits, _ = qm9_fingerprints(args.molecules + args.new_molecules, random_state=args.seed)
    featurise = time.perf_counter() - start
    train, new = bits[: args.molecules], bits[args.molecules :]
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(
        f"QM9 fingerprints: {len(bits)} molecules x {bits.shape[1]} bits, "
        f"{bits.mean() * bits.shape[1]:.1f} bits on a molecule, read and featurised in "
        f"{featurise:.1f} s; {len(os.sched_getaffinity(0))} cores, "
        f"OMP_NUM_THREADS={threads}\n"
    )
    methods = [
        (
            "diffusion map",
            DiffusionMap(
                n_components=args.components,
                kernel=TanimotoKernel(),
                n_landmarks=args.landmarks,
                random_state=args.seed,
            ),
        )
    ]
    if args.kpca:
        methods.append(
            (
                "kernel PCA",
                KernelPCAEmbedding(
                    n_components=args.components,
                    kernel=TanimotoKernel(),
                    n_landmarks=args.landmarks,
                    random_state=args.seed,
                ),
            )
        )
    print(
        "| method | n | landmarks | fit wall (s) | fit CPU (s) | fit peak alloc (MB) "
        "| transform of new (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, estimator in methods:
        _, wall, cpu, peak = _measure(estimator.fit, train)
        if len(new):
            _, extend, _, _ = _measure(estimator.transform, new)
            extend_text = f"{extend:.1f} ({len(new)})"
        else:
            extend_text = "-"
        print(
            f"| {name} | {len(train)} | {args.landmarks} | {wall:.1f} | {cpu:.1f} "
            f"| {peak / 2**20:.0f} | {extend_text} |"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"\nleading eigenvalues: {np.array2string(methods[0][1].eigenvalues_, precision=4)}")
    print(f"process peak resident memory: {rss:.0f} MB (QM9 text and fingerprints included)")
