"""IOKR and MP-IOKR on QM9: from a vibrational spectrum to the structure, among isomers.

A retrieval task parallel to the metabolite identification of Brouard et al. (2017) (section 3.2),
with no download: the input of a molecule is its spectrum of harmonic frequencies
from QM9, broadened by Gaussians (a "stick" spectrum without intensities, which QM9
does not give); the output is its structure, as a Morgan fingerprint (RDKit, radius 2,
2048 bits) under the Tanimoto kernel; the candidates of a molecule are all QM9
molecules of its molecular formula, the formula being known as in the paper.

A *library* of ``--molecules`` annotated molecules is drawn from the formulas with
2 to ``--max-set-size`` isomers in QM9, and evaluated by ``--folds``-fold
cross-validation. Input kernels: Gaussian kernels on the spectra broadened with the
widths ``--sigmas`` (cm^-1); the kernel width of each is chosen in every training
fold, with IOKR's leave-one-out error. Methods:

* ``1-NN``: candidates ranked by Tanimoto similarity to the structure of the training
  molecule with the most similar spectrum (combined input kernel).
* ``IOKR``: :class:`asebo.learn.iokr.IOKRCV`, on the first input kernel and on all of them
  combined (uniform weights), lambda by the closed-form leave-one-out squared error
  ("LOO") or, like MP-IOKR, by the mean reciprocal rank of held-out training molecules
  among their candidates ("ranking CV", ``--inner-folds`` folds).
* ``IOKR, pool as training data``: IOKR (ranking CV) trained on the training molecules
  and the pool below, whose spectra it then uses as labelled data: the fair baseline
  of MP-IOKR with known candidate inputs.
* ``MP-IOKR``: :class:`asebo.learn.mpiokr.MPIOKRCV` on the combined kernel, with candidate
  inputs known (Prop. 3: QM9 has the spectra of all candidates), approximated with one
  gamma (Prop. 4, "joint") and with one gamma per kernel (Prop. 5, "separate"), and the
  joint approximation without test-time centring (the paper's h(x)). The candidate
  statistics use a pool of ``--pool-per-set`` random isomers of each distinct training
  formula, never a test molecule, as the paper's random subsets of the candidate sets.

``--lambda-sweep`` replaces the comparison by IOKR and joint MP-IOKR at every lambda
of the grid (no selection), to separate the effect of the method from that of the
lambda criterion; ``--max-folds`` stops after the first folds.

Accuracies are top-k percentages of test molecules whose structure is among the k
best ranked candidates; candidates with the same fingerprint as the right one, and
ties in score, count against it. Times are CPU seconds summed over folds: training
includes the hyperparameter selection; the kernel matrices (spectra, fingerprints,
Tanimoto and Gaussian Gram matrices) are computed once per fold, outside the timings,
as in the paper's Table 5.
"""

import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from asebo.extras import missing_extra

TOP_K = (1, 5, 10, 20)
REFERENCE = "IOKR, lambda by ranking CV"  # IOKR with MP-IOKR's lambda criterion
_ELEMENT_ORDER = {6: 0, 1: 1}  # Hill order: C, H, then the others alphabetically
_SYMBOLS = {1: "H", 6: "C", 7: "N", 8: "O", 9: "F"}


def molecular_formula(numbers):
    """Hill formula (``"C7H10O2"``) from atomic numbers."""
    counts = Counter(int(z) for z in numbers)
    order = sorted(counts, key=lambda z: (_ELEMENT_ORDER.get(z, 2), _SYMBOLS[z]))
    return "".join(f"{_SYMBOLS[z]}{counts[z] if counts[z] > 1 else ''}" for z in order)


def morgan_fingerprints(smiles, radius=2, n_bits=2048):
    """Morgan (ECFP-like) bit fingerprints from SMILES, as a sparse 0/1 matrix.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n_bits), float64
    """
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdFingerprintGenerator

    RDLogger.DisableLog("rdApp.*")
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    rows, cols = [], []
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s)
        if mol is None:
            raise ValueError(f"RDKit cannot parse SMILES {s!r} (molecule {i})")
        bits = list(generator.GetFingerprint(mol).GetOnBits())
        rows.extend([i] * len(bits))
        cols.extend(bits)
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(smiles), n_bits))


def tanimoto_sparse(A, B):
    """Tanimoto kernel between the rows of two sparse 0/1 matrices, as a dense array.

    The same values as :class:`asebo.kernels.TanimotoKernel` on the dense rows, at the
    cost of a sparse-dense product (fingerprints set a few dozen of 2048 bits).

    Returns
    -------
    ndarray of shape (n_A, n_B)
    """
    inner = np.asarray(A @ B.T.toarray())  # (n_A, n_B)
    norm_a = np.asarray(A.multiply(A).sum(axis=1)).ravel()
    norm_b = np.asarray(B.multiply(B).sum(axis=1)).ravel()
    union = norm_a[:, None] + norm_b[None, :] - inner
    return np.where(union > 0, inner / np.where(union > 0, union, 1.0), 1.0)


def broadened_spectra(frequencies, sigma, step=None, upper=4200.0):
    """Sums of unit Gaussians of width ``sigma`` at each harmonic frequency, on a grid.

    Parameters
    ----------
    frequencies : sequence of n arrays
        Harmonic frequencies in cm^-1.
    sigma : float
        Gaussian width (standard deviation) in cm^-1.
    step : float, optional
        Grid spacing; ``sigma / 2`` by default.
    upper : float
        Upper end of the grid, which starts at 0 cm^-1.

    Returns
    -------
    ndarray of shape (n, n_grid)
    """
    grid = np.arange(0.0, upper + 1e-9, sigma / 2 if step is None else step)  # (n_grid,)
    spectra = np.empty((len(frequencies), len(grid)))
    for i, f in enumerate(frequencies):
        spectra[i] = np.exp(-0.5 * ((grid[None, :] - f[:, None]) / sigma) ** 2).sum(axis=0)
    return spectra


def gaussian_gram(A, B, gamma):
    """:class:`asebo.kernels.GaussianKernel` values ``exp(-gamma |a - b|^2)`` by BLAS."""
    from asebo.kernels import squared_distances

    return np.exp(-gamma * squared_distances(A, B))


@dataclass
class RetrievalData:
    """The QM9 retrieval task: a library of annotated molecules and their isomers.

    Attributes
    ----------
    library : ndarray of shape (n_library,), int
        Positions in the universe of the annotated molecules.
    formula : ndarray of shape (n_universe,), int
        Formula index of every molecule of the universe (all isomers of the library's
        formulas).
    formulas : list of str
        The formulas.
    fingerprints : scipy.sparse.csr_matrix of shape (n_universe, 2048)
    spectra : list of ndarray of shape (n_universe, n_grid)
        One broadened spectrum per width.
    qm9_ids : ndarray of shape (n_universe,), int
    """

    library: np.ndarray
    formula: np.ndarray
    formulas: list
    fingerprints: sp.csr_matrix
    spectra: list
    qm9_ids: np.ndarray

    def isomers(self, f):
        """Universe positions of the molecules of formula index ``f``."""
        return np.flatnonzero(self.formula == f)


def build_data(n_molecules, max_set_size, sigmas, random_state):
    """Draw the library from QM9 and compute fingerprints and spectra of its isomers."""
    from asebo.learn.qm9 import load_qm9

    qm9 = load_qm9()
    names = np.array([molecular_formula(z) for z in qm9.numbers])
    formulas, formula, counts = np.unique(names, return_inverse=True, return_counts=True)
    eligible = np.flatnonzero((counts[formula] >= 2) & (counts[formula] <= max_set_size))
    if n_molecules > len(eligible):
        raise ValueError(f"only {len(eligible)} molecules have 2 to {max_set_size} isomers")
    rng = np.random.default_rng(random_state)
    library = np.sort(rng.choice(eligible, n_molecules, replace=False))
    universe = np.flatnonzero(np.isin(formula, formula[library]))  # (n_universe,)
    position = np.full(len(qm9), -1)
    position[universe] = np.arange(len(universe))
    used, universe_formula = np.unique(formula[universe], return_inverse=True)
    return RetrievalData(
        library=position[library],
        formula=universe_formula,
        formulas=[str(formulas[f]) for f in used],
        fingerprints=morgan_fingerprints([qm9.smiles[i] for i in universe]),
        spectra=[broadened_spectra([qm9.frequencies[i] for i in universe], s) for s in sigmas],
        qm9_ids=np.asarray(qm9.ids)[universe],
    )


def select_gaussian_width(spectra, KY, factors, lams):
    """Gaussian kernel ``gamma`` by IOKR's closed-form leave-one-out error (centred kernels).

    ``gamma = factor / median squared distance``; returns the best ``gamma``.
    """
    from asebo.kernels import squared_distances
    from asebo.learn.iokr import loo_squared_errors

    sq = squared_distances(spectra, spectra)  # (l, l)
    base = 1.0 / np.median(sq[np.triu_indices(len(sq), 1)])
    errors = [
        loo_squared_errors(np.exp(-f * base * sq), KY, lams, centre=True).min() for f in factors
    ]
    return factors[int(np.argmin(errors))] * base


@dataclass
class FoldKernels:
    """Kernel matrices of one training fold, against the basis ``[S, P]``.

    ``S`` are the training molecules, ``P`` the pool of sampled isomers of their
    formulas; input matrices are lists with one entry per spectrum width.
    """

    KX_SS: list  # (l, l)
    KX_PB: list  # (pool, l + pool)
    KY_SS: np.ndarray  # (l, l)
    KY_PB: np.ndarray  # (pool, l + pool)
    candidate_sets: list  # l arrays of pool rows
    pool_sets: list  # the same for each pool molecule: the pool rows of its formula
    gammas: list  # Gaussian kernel parameter of each spectrum width
    train: np.ndarray  # (l,) universe positions of S
    pool: np.ndarray  # (pool,) universe positions of P


def fold_kernels(data, train, test, pool_per_set, width_factors, lams, rng):
    """Select the kernel widths on the training molecules and compute the fold's matrices.

    The pool never holds a test molecule: with known candidate inputs it would be a
    labelled training example.
    """
    F = data.fingerprints
    KY_SS = tanimoto_sparse(F[train], F[train])
    gammas = [select_gaussian_width(Z[train], KY_SS, width_factors, lams) for Z in data.spectra]
    pool, candidate_sets, start = [], {}, 0
    for f in np.unique(data.formula[train]):
        isomers = np.setdiff1d(data.isomers(f), test)
        pool.append(rng.choice(isomers, min(pool_per_set, len(isomers)), replace=False))
        candidate_sets[f] = np.arange(start, start + len(pool[-1]))
        start += len(pool[-1])
    pool = np.concatenate(pool)
    basis = np.concatenate([train, pool])
    return FoldKernels(
        KX_SS=[gaussian_gram(Z[train], Z[train], g) for Z, g in zip(data.spectra, gammas)],
        KX_PB=[gaussian_gram(Z[pool], Z[basis], g) for Z, g in zip(data.spectra, gammas)],
        KY_SS=KY_SS,
        KY_PB=tanimoto_sparse(F[pool], F[basis]),
        candidate_sets=[candidate_sets[f] for f in data.formula[train]],
        pool_sets=[candidate_sets[f] for f in data.formula[pool]],
        gammas=gammas,
        train=train,
        pool=pool,
    )


def _iokr(kernels, lams, inner_folds=None, random_state=None):
    """IOKR on the input kernels ``kernels`` (indices).

    lambda by closed-form leave-one-out squared error (``inner_folds`` None), or by the
    mean reciprocal rank among the training candidate sets in K-fold cross-validation.
    """
    from asebo.learn.iokr import IOKRCV, PRECOMPUTED

    def fit(fk):
        model = IOKRCV(
            [PRECOMPUTED] * len(kernels),
            PRECOMPUTED,
            lams=lams,
            cv=inner_folds,
            random_state=random_state,
        )
        ranking = (
            {}
            if inner_folds is None
            else dict(candidates=fk.KY_PB, candidate_sets=fk.candidate_sets)
        )
        return model.fit([fk.KX_SS[k] for k in kernels], fk.KY_SS, **ranking)

    def scores(model, fk, group):
        l = len(fk.train)
        return model.decision_function(
            [group["KX_QB"][k][:, :l] for k in kernels],
            group["KY_TB"][:, :l],
            candidate_gram=group["KY_TT"],
        )

    return fit, scores


def _iokr_with_pool(kernels, lams, inner_folds, random_state):
    """IOKR trained on the training molecules and the pool, lambda by ranking."""
    from asebo.learn.iokr import IOKRCV, PRECOMPUTED

    def fit(fk):
        l = len(fk.train)
        KX = [
            np.vstack([np.hstack([fk.KX_SS[k], fk.KX_PB[k][:, :l].T]), fk.KX_PB[k]])
            for k in kernels
        ]
        KY = np.vstack([np.hstack([fk.KY_SS, fk.KY_PB[:, :l].T]), fk.KY_PB])  # over [S, P]
        model = IOKRCV(
            [PRECOMPUTED] * len(kernels),
            PRECOMPUTED,
            lams=lams,
            cv=inner_folds,
            random_state=random_state,
        )
        return model.fit(
            KX, KY, np.hstack([fk.KY_PB, fk.KY_PB[:, l:]]), fk.candidate_sets + fk.pool_sets
        )

    def scores(model, fk, group):
        return model.decision_function(
            [group["KX_QB"][k] for k in kernels], group["KY_TB"], candidate_gram=group["KY_TT"]
        )

    return fit, scores


def _mp_iokr(known, lams, gammas, separate, centre, inner_folds, random_state):
    """MP-IOKR on all input kernels in one of the paper's settings."""
    from asebo.learn.iokr import PRECOMPUTED
    from asebo.learn.mpiokr import MPIOKRCV

    def fit(fk):
        model = MPIOKRCV(
            [PRECOMPUTED] * len(fk.KX_SS),
            PRECOMPUTED,
            lams=lams,
            gammas=gammas,
            separate=separate,
            cv=inner_folds,
            centre=centre,
            random_state=random_state,
        )
        return model.fit(
            fk.KX_SS,
            fk.KY_SS,
            fk.KY_PB,
            fk.candidate_sets,
            candidate_inputs=fk.KX_PB if known else None,
        )

    def scores(model, fk, group):
        l = len(fk.train)
        X = group["KX_QB"] if known else [K[:, :l] for K in group["KX_QB"]]
        return model.decision_function(
            X,
            group["KY_TB"],
            candidate_inputs=group["KX_TB"] if known else None,
            candidate_gram=group["KY_TT"],
        )

    return fit, scores


def _mp_iokr_fixed_lambda(lam, gammas):
    """MP-IOKR, joint approximation (Prop. 4) at a given lambda; gamma by leave-one-out."""
    from asebo.learn.iokr import PRECOMPUTED, loo_squared_errors
    from asebo.learn.mpiokr import MPIOKR

    def fit(fk):
        gamma = gammas[
            int(np.argmin(loo_squared_errors(fk.KY_SS, sum(fk.KX_SS) / len(fk.KX_SS), gammas)))
        ]
        return MPIOKR([PRECOMPUTED] * len(fk.KX_SS), PRECOMPUTED, lam=lam, gamma=gamma).fit(
            fk.KX_SS, fk.KY_SS, fk.KY_PB, fk.candidate_sets
        )

    return fit, _mp_iokr(False, [lam], gammas, False, True, 2, None)[1]


def _nearest_neighbour():
    """Rank by Tanimoto similarity to the structure of the nearest training spectrum."""

    def fit(fk):
        return None

    def scores(model, fk, group):
        l = len(fk.train)
        nearest = np.argmax(sum(K[:, :l] for K in group["KX_QB"]), axis=1)  # (m,)
        return group["KY_TB"][:, nearest].T

    return fit, scores


def methods(args):
    """The compared methods: name -> (fit(fold_kernels), scores(model, fold_kernels, group))."""
    mp = dict(
        lams=args.lams, gammas=args.gammas, inner_folds=args.inner_folds, random_state=args.seed
    )
    all_kernels = list(range(len(args.sigmas)))
    ranking = dict(inner_folds=args.inner_folds, random_state=args.seed)
    table = {
        "1-NN": _nearest_neighbour(),
        f"IOKR (sigma={args.sigmas[0]:g}), lambda by LOO": _iokr([0], args.lams),
    }
    if len(all_kernels) > 1:
        table["IOKR (all kernels), lambda by LOO"] = _iokr(all_kernels, args.lams)
    table[REFERENCE] = _iokr(all_kernels, args.lams, **ranking)
    table["IOKR, pool as training data"] = _iokr_with_pool(all_kernels, args.lams, **ranking)
    table["MP-IOKR known inputs (Prop. 3)"] = _mp_iokr(True, separate=False, centre=True, **mp)
    table["MP-IOKR joint (Prop. 4)"] = _mp_iokr(False, separate=False, centre=True, **mp)
    if len(all_kernels) > 1:
        table["MP-IOKR separate (Prop. 5)"] = _mp_iokr(False, separate=True, centre=True, **mp)
    table["MP-IOKR joint, h(x) = W phi(x)"] = _mp_iokr(False, separate=False, centre=False, **mp)
    return table


def lambda_sweep_methods(args):
    """IOKR and joint MP-IOKR on all kernels at every lambda of the grid, unselected."""
    all_kernels = list(range(len(args.sigmas)))
    table = {}
    for lam in args.lams:
        table[f"IOKR (all kernels), lambda={lam:g}"] = _iokr(all_kernels, [lam])
        table[f"MP-IOKR joint, lambda={lam:g}"] = _mp_iokr_fixed_lambda(lam, args.gammas)
    return table


def _test_groups(data, test, fk):
    """Test molecules grouped by formula, with the kernel matrices of their candidates."""
    F = data.fingerprints
    basis = np.concatenate([fk.train, fk.pool])
    for f in np.unique(data.formula[test]):
        isomers = data.isomers(f)
        rows = test[data.formula[test] == f]
        yield {
            "rows": rows,
            "true": np.searchsorted(isomers, rows),
            "KY_TB": tanimoto_sparse(F[isomers], F[basis]),
            "KY_TT": tanimoto_sparse(F[isomers], F[isomers]),
            "KX_QB": [gaussian_gram(Z[rows], Z[basis], g) for Z, g in zip(data.spectra, fk.gammas)],
            "KX_TB": [
                gaussian_gram(Z[isomers], Z[basis], g) for Z, g in zip(data.spectra, fk.gammas)
            ],
        }


def pessimistic_ranks(scores, true, KY_TT):
    """0-based rank of the right candidate; ties and identical fingerprints count against it."""
    ranks = []
    for s, t in zip(scores, true):
        others = np.arange(len(s)) != t
        ties = (s == s[t]) | (KY_TT[t] >= 1.0 - 1e-12)
        ranks.append(int(np.sum(others & ((s > s[t]) | ties))))
    return np.array(ranks)


def run_benchmark(args, log=print):
    """Cross-validate every method; returns ranks and CPU times per method."""
    try:  # scikit-learn and the estimators are imported here, not for --help
        from sklearn.model_selection import KFold
    except ImportError as error:
        raise missing_extra(error, "learn", "asebo bench iokr") from error

    t0 = time.process_time()
    data = build_data(args.molecules, args.max_set_size, args.sigmas, args.seed)
    log(
        f"library: {len(data.library)} molecules of {len(np.unique(data.formula[data.library]))}"
        f" formulas; {len(data.formula)} candidates in all "
        f"({time.process_time() - t0:.0f} s CPU to load QM9, fingerprints and spectra)"
    )
    table = lambda_sweep_methods(args) if args.lambda_sweep else methods(args)
    ranks = {name: [] for name in table}
    times = {name: {"train": 0.0, "test": 0.0} for name in table}
    kernel_time = 0.0
    rng = np.random.default_rng(args.seed)
    folds = KFold(args.folds, shuffle=True, random_state=args.seed)
    for n, (train_idx, test_idx) in enumerate(folds.split(data.library)):
        if args.max_folds is not None and n >= args.max_folds:
            break
        t = time.process_time()
        train, test = data.library[train_idx], data.library[test_idx]
        fk = fold_kernels(data, train, test, args.pool_per_set, args.width_factors, args.lams, rng)
        kernel_time += time.process_time() - t
        models = {}
        for name, (fit, _) in table.items():
            t = time.process_time()
            models[name] = fit(fk)
            times[name]["train"] += time.process_time() - t
        n_candidates = 0
        t = time.process_time()
        for group in _test_groups(data, test, fk):
            kernel_time += time.process_time() - t
            n_candidates += len(group["KY_TT"])
            for name, (_, score) in table.items():
                t = time.process_time()
                s = score(models[name], fk, group)
                times[name]["test"] += time.process_time() - t
                ranks[name].append(pessimistic_ranks(s, group["true"], group["KY_TT"]))
            t = time.process_time()
        log(
            f"fold {n + 1}/{args.folds}: {len(train)} training molecules, pool of "
            f"{len(fk.pool)} isomers, {n_candidates} test candidates"
        )
    ranks = {name: np.concatenate(r) for name, r in ranks.items()}
    return ranks, times, kernel_time, data


def top_k_accuracy(ranks, k):
    """Percentage of 0-based ranks below ``k``."""
    return 100.0 * np.mean(np.asarray(ranks) < k)


def markdown_table(ranks, times):
    """Table 3 + Table 5 of the paper, for our task, as markdown."""
    header = "| method | " + " | ".join(f"top-{k}" for k in TOP_K) + " | train CPU s | test CPU s |"
    lines = [header, "|" + "---|" * (len(TOP_K) + 3)]
    for name, r in ranks.items():
        accs = " | ".join(f"{top_k_accuracy(r, k):.1f}" for k in TOP_K)
        lines.append(
            f"| {name} | {accs} | {times[name]['train']:.1f} | {times[name]['test']:.1f} |"
        )
    return "\n".join(lines)


def sign_tests(ranks, reference):
    """Paired sign test of each method against ``reference`` (the paper's Table 4).

    Returns, per method, the numbers of test molecules ranked better and worse than by
    the reference, and the two-sided binomial p-value, ties left out.
    """
    from scipy.stats import binomtest

    rows = {}
    for name, r in ranks.items():
        if name == reference:
            continue
        better = int(np.sum(r < ranks[reference]))
        worse = int(np.sum(r > ranks[reference]))
        p = binomtest(better, better + worse).pvalue if better + worse else 1.0
        rows[name] = (better, worse, p)
    return rows


def plot_top_k_differences(ranks, reference, path, k_max=50):
    """Top-k accuracy minus that of ``reference`` for k = 1..k_max (the paper's Fig. 2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = np.arange(1, k_max + 1)
    base = np.array([top_k_accuracy(ranks[reference], k) for k in ks])
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, r in ranks.items():
        if name != reference:
            ax.plot(ks, [top_k_accuracy(r, k) for k in ks] - base, label=name)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("k")
    ax.set_ylabel("top-k accuracy difference (points)")
    ax.set_title(f"minus {reference}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser):
    """Options of ``asebo bench iokr``."""
    parser.add_argument(
        "--molecules",
        type=int,
        default=1000,
        help="annotated molecules in the library (default 1000)",
    )
    parser.add_argument("--folds", type=int, default=10, help="cross-validation folds")
    parser.add_argument(
        "--max-set-size",
        type=int,
        default=1000,
        help="use formulas with at most this many QM9 isomers (default 1000)",
    )
    parser.add_argument(
        "--pool-per-set",
        type=int,
        default=10,
        help="isomers per distinct training formula in the MP-IOKR "
        "candidate statistics (default 10)",
    )
    parser.add_argument(
        "--sigmas",
        type=float,
        nargs="+",
        default=[20.0, 40.0],
        help="Gaussian broadenings of the spectra in cm^-1, one input kernel each (default 20 40)",
    )
    parser.add_argument(
        "--lams", type=float, nargs="+", default=list(np.logspace(-4, 2, 7)), help="grid of lambda"
    )
    parser.add_argument(
        "--gammas",
        type=float,
        nargs="+",
        default=list(np.logspace(-4, 0, 5)),
        help="grid of gamma (MP-IOKR input approximation)",
    )
    parser.add_argument(
        "--width-factors",
        type=float,
        nargs="+",
        default=[0.25, 0.5, 1, 2, 4],
        help="Gaussian kernel gamma grid, in units of 1 / median squared distance",
    )
    parser.add_argument(
        "--inner-folds", type=int, default=3, help="folds of the lambda selection of MP-IOKR"
    )
    parser.add_argument(
        "--max-folds", type=int, help="evaluate only the first folds of the cross-validation"
    )
    parser.add_argument(
        "--lambda-sweep",
        action="store_true",
        help="instead of the comparison, IOKR and joint MP-IOKR at every "
        "lambda of --lams, to see the selection's effect",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", help="write the top-k difference plot to this PNG file")


def run(args):
    """Run the benchmark and print the table."""
    ranks, times, kernel_time, _ = run_benchmark(args)
    print(markdown_table(ranks, times))
    print(f"\nkernel matrices: {kernel_time:.1f} CPU s in all (not in the times above)")
    reference = REFERENCE if REFERENCE in ranks else list(ranks)[0]
    print(f"\nsign test against {reference}, per test molecule:\n")
    print("| method | ranked better | ranked worse | p (two-sided) |\n|---|---|---|---|")
    for name, (better, worse, p) in sign_tests(ranks, reference).items():
        print(f"| {name} | {better} | {worse} | {p:.1e} |")
    if args.figure:
        plot_top_k_differences(ranks, reference, args.figure)
        print(f"figure written to {args.figure}")
