"""Energy prediction with the SVD kernel (Wong and Kolter, "Application to Molecular ...")."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning

from asebo.cli import main
from asebo.kernels import svd_kernel_blocks
from asebo.learn.prediction import (
    DATA_DIR,
    ConfigurationSet,
    EigenspectrumKRR,
    MeanPredictor,
    SVDDerivativeKRR,
    SVDKernelKRR,
    configuration_folds,
    coulomb_eigenspectrum,
    dataset_filename,
    displaced_positions,
    evaluate_model,
    generate_dataset,
    load_dataset,
    select_hyperparameters,
)
from asebo.learn.prediction.selection import _evidence_scores, _ridge_path

BASE = np.array([[0.0, 0.0, 0.0], [1.1, 0.1, 0.0], [-0.3, 1.2, 0.2], [0.4, -0.2, 1.3]])


def pair_energy(positions):
    """A smooth rotation-invariant energy, sum of exp(-r^2 / 2) over pairs, and its forces."""
    diff = positions[:, :, None] - positions[:, None]  # (m, n, n, 3)
    weight = np.exp(-0.5 * (diff**2).sum(-1))  # (m, n, n)
    n = positions.shape[1]
    weight[:, np.arange(n), np.arange(n)] = 0.0
    energies = 0.5 * weight.sum(axis=(1, 2))
    forces = (weight[..., None] * diff).sum(axis=2)  # -dE/dx
    return energies, forces


def synthetic(count, seed, scale=0.15):
    positions = displaced_positions(BASE, count, scale, seed)  # (count, 4, 3)
    energies, forces = pair_energy(positions)
    return positions, energies, forces


# ---- data ------------------------------------------------------------------------
def test_displacements_are_seeded_and_extend_smaller_sets():
    first = displaced_positions(BASE, 6, 0.1, random_state=3)
    assert np.array_equal(first, displaced_positions(BASE, 6, 0.1, random_state=3))
    assert np.array_equal(first[:4], displaced_positions(BASE, 4, 0.1, random_state=3))
    assert not np.allclose(first, displaced_positions(BASE, 6, 0.1, random_state=4))
    assert np.std(first - BASE) == pytest.approx(0.1, rel=0.5)


def test_stored_forces_are_minus_the_gradient_of_the_stored_energies():
    from ase import Atoms
    from ase.calculators.emt import EMT

    data = generate_dataset("water", "emt", count=2, random_state=1)
    atoms = Atoms(data.numbers, positions=data.positions[1], calculator=EMT())
    assert atoms.get_potential_energy() == pytest.approx(data.energies[1], abs=1e-10)
    step = 1e-5
    for atom, axis in [(0, 0), (1, 2), (2, 1)]:
        shifted = data.positions[1].copy()
        shifted[atom, axis] += step
        atoms.positions = shifted
        plus = atoms.get_potential_energy()
        shifted[atom, axis] -= 2 * step
        atoms.positions = shifted
        minus = atoms.get_potential_energy()
        assert -(plus - minus) / (2 * step) == pytest.approx(data.forces[1, atom, axis], abs=1e-6)


def test_generation_is_reproducible_with_the_seed():
    one = generate_dataset("water", "emt", count=3, random_state=1)
    two = generate_dataset("water", "emt", count=3, random_state=1)
    other = generate_dataset("water", "emt", count=3, random_state=2)
    for name in ("numbers", "equilibrium", "positions", "energies", "forces"):
        assert np.array_equal(getattr(one, name), getattr(two, name))
    assert not np.allclose(one.positions, other.positions)
    assert list(one.numbers) == [8, 1, 1]
    assert np.isfinite(one.energies).all() and np.isfinite(one.forces).all()


def test_cache_round_trip_and_resume(tmp_path):
    full = generate_dataset("water", "emt", count=4, random_state=0)
    path = tmp_path / dataset_filename("water", "emt")
    full.save(path)
    loaded = ConfigurationSet.load(path)
    for name in ("numbers", "equilibrium", "positions", "energies", "forces"):
        assert np.array_equal(getattr(full, name), getattr(loaded, name))
    assert loaded.metadata == full.metadata
    # a prefix comes from the cache without any calculation
    prefix = load_dataset("water", "emt", count=2, cache_dir=tmp_path, generate=False)
    assert np.array_equal(prefix.energies, full.energies[:2])
    with pytest.raises(ValueError, match="only 4"):
        load_dataset("water", "emt", count=6, cache_dir=tmp_path, generate=False)
    # an interrupted set resumes and gives what one uninterrupted run gives
    partial = full.subset(slice(0, 4))
    partial.energies[2:] = np.nan
    partial.save(path)
    assert ConfigurationSet.load(path).n_labelled == 2
    resumed = load_dataset("water", "emt", count=5, cache_dir=tmp_path)
    reference = generate_dataset("water", "emt", count=5, random_state=0)
    np.testing.assert_allclose(resumed.energies, reference.energies, rtol=0, atol=1e-10)
    np.testing.assert_allclose(resumed.forces, reference.forces, rtol=0, atol=1e-10)


def test_non_positive_counts_are_refused(tmp_path, capsys):
    # count=-3 returned 97 of the 100 shipped configurations, count=0 an empty set
    for count in (0, -3):
        with pytest.raises(ValueError, match="count must be 1 or more"):
            load_dataset("water", "gpaw", count, cache_dir=tmp_path, generate=False)
    with pytest.raises(SystemExit):
        main(["bench", "prediction", "--configs", "-3", "--cache-dir", str(tmp_path)])
    assert "--configs: must be a whole number of 1 or more" in capsys.readouterr().err


def test_the_example_and_load_dataset_make_one_set(tmp_path):
    # examples/make_prediction_data.py pre-relaxed with GFN2-xTB before EMT, the
    # benchmark's load_dataset did not: two sets under one file name
    path = Path(__file__).resolve().parents[1] / "examples" / "make_prediction_data.py"
    spec = importlib.util.spec_from_file_location("make_prediction_data", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.make("water", "emt", 2, tmp_path / "example", 0)
    made = ConfigurationSet.load(tmp_path / "example" / dataset_filename("water", "emt"))
    loaded = load_dataset("water", "emt", 2, cache_dir=tmp_path / "cache")
    assert np.array_equal(made.equilibrium, loaded.equilibrium)
    assert np.array_equal(made.energies, loaded.energies)
    assert made.metadata == loaded.metadata and loaded.metadata["prerelax"] is None


def test_a_set_made_with_other_settings_is_not_resumed(tmp_path):
    path = tmp_path / "water.npz"
    generate_dataset("water", "emt", count=2, path=path)
    for option in ({"prerelax": "emt"}, {"fmax": 0.05}):
        with pytest.raises(ValueError, match=f"{next(iter(option))}="):
            generate_dataset("water", "emt", count=3, path=path, **option)
    assert ConfigurationSet.load(path).n_labelled == 2  # untouched
    # another pre-relaxation is another file of the cache
    other = load_dataset("water", "emt", 1, cache_dir=tmp_path, prerelax="emt")
    assert other.metadata["prerelax"] == "emt"
    assert (tmp_path / "water_emt_d0.12_s0_pre-emt.npz").exists()


def test_the_shipped_sets_record_their_pre_relaxation(tmp_path):
    # made by examples/make_prediction_data.py: GFN2-xTB before GPAW, none before GFN2-xTB
    for molecule, calculator, prerelax in (
        ("water", "gpaw", "gfn2"),
        ("glycerol", "gpaw:mode=lcao", "gfn2"),
        ("water", "gfn2", None),
    ):
        data = load_dataset(molecule, calculator, 2, cache_dir=tmp_path, generate=False)
        assert data.metadata["prerelax"] == prerelax
    # a GPAW set cached before the metadata held prerelax was made by load_dataset,
    # without one: not the default set, but found under the name of prerelax=None
    legacy = ConfigurationSet.load(DATA_DIR / "water_gpaw_d0.12_s0.npz").subset(slice(0, 3))
    legacy.save(tmp_path / "water_gpaw_d0.12_s0.npz")
    with pytest.raises(ValueError, match="prerelax=None, not prerelax='gfn2'"):
        load_dataset("water", "gpaw", 2, cache_dir=tmp_path, generate=False)
    (tmp_path / "water_gpaw_d0.12_s0.npz").rename(
        tmp_path / dataset_filename("water", "gpaw", prerelax=None)
    )
    found = load_dataset("water", "gpaw", 2, cache_dir=tmp_path, generate=False, prerelax=None)
    assert np.array_equal(found.energies, legacy.energies[:2])


def test_file_names_are_flat_distinct_and_keep_the_shipped_names(tmp_path):
    for path in DATA_DIR.glob("*.npz"):
        metadata = ConfigurationSet.load(path).metadata
        keys = ("molecule", "calculator", "displacement", "random_state")
        assert dataset_filename(*(metadata[key] for key in keys)) == path.name
    smiles = ("C/C=C/C", "C/C=C\\C", "CC=CC", "C_C", "C%5FC", "[O-]C")
    names = {dataset_filename(text, "gfn2") for text in smiles}
    assert len(names) == len(smiles)
    assert not any("/" in name or "\\" in name for name in names)
    load_dataset("C/C=C/C", "emt", 1, cache_dir=tmp_path)  # trans-2-butene
    assert [p.name for p in tmp_path.iterdir()] == ["C%2FC=C%2FC_emt_d0.05_s0.npz"]


# ---- Coulomb eigenspectrum -------------------------------------------------------
def test_coulomb_eigenspectrum_closed_form_for_two_protons():
    from ase.units import Bohr

    r = 0.74  # Å
    spectrum = coulomb_eigenspectrum([1, 1], np.array([[0.0, 0, 0], [0, 0, r]]))
    np.testing.assert_allclose(spectrum, [0.5 + Bohr / r, 0.5 - Bohr / r])


def test_coulomb_eigenspectrum_is_invariant_to_permutation_rotation_translation():
    numbers = np.array([8, 6, 1, 7])
    positions = synthetic(3, 5)[0]  # (3, 4, 3)
    reference = coulomb_eigenspectrum(numbers, positions)
    order = np.array([2, 0, 3, 1])
    rotation = Rotation.random(random_state=1).as_matrix()
    moved = positions[:, order] @ rotation.T + np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(coulomb_eigenspectrum(numbers[order], moved), reference, rtol=1e-12)
    assert np.all(np.diff(reference, axis=1) <= 0)


# ---- models ----------------------------------------------------------------------
def dense_reference_prediction(train, energies, forces, test, gamma, lam, lam_deriv):
    """Eq. 34 with the joint covariance assembled pair by pair from svd_kernel_blocks."""
    m, n, _ = train.shape
    size = 3 * n + 1
    K = np.zeros((m * size, m * size))
    for i in range(m):
        for j in range(m):
            k, dk_dX, dk_dZ, d2k = svd_kernel_blocks(train[i], train[j], gamma)
            block = np.zeros((size, size))
            block[0, 0] = k
            block[0, 1:] = dk_dZ.ravel()
            block[1:, 0] = dk_dX.ravel()
            block[1:, 1:] = d2k
            K[i * size : (i + 1) * size, j * size : (j + 1) * size] = block
    regularisation = np.tile(np.r_[lam, np.full(3 * n, lam_deriv)], m)
    offset = energies.mean()
    y = np.concatenate([(energies - offset)[:, None], -forces.reshape(m, -1)], axis=1).ravel()
    cross = np.zeros((len(test), m * size))
    for t in range(len(test)):
        for j in range(m):
            k, _, dk_dZ, _ = svd_kernel_blocks(test[t], train[j], gamma)
            cross[t, j * size] = k
            cross[t, j * size + 1 : (j + 1) * size] = dk_dZ.ravel()
    return offset + cross @ np.linalg.solve(K + np.diag(regularisation), y)


@pytest.mark.parametrize("gamma, positive_definite", [(1.5, True), (0.3, False)])
def test_derivative_prediction_equals_dense_reference(gamma, positive_definite):
    # at gamma = 0.3 the improper kernel's joint covariance is indefinite (Wong and Kolter)
    train, energies, forces = synthetic(6, 0)
    test = synthetic(3, 1)[0]
    model = SVDDerivativeKRR(gamma=gamma, lam=1e-5, lam_deriv=1e-3).fit(train, energies, forces)
    assert model.positive_definite_ == positive_definite
    expected = dense_reference_prediction(train, energies, forces, test, gamma, 1e-5, 1e-3)
    np.testing.assert_allclose(model.predict(test), expected, rtol=1e-9, atol=1e-9)


def test_cg_and_cholesky_agree():
    train, energies, forces = synthetic(8, 2)
    test = synthetic(5, 3)[0]
    params = dict(gamma=1.5, lam=1e-2, lam_deriv=1e-2)
    dense = SVDDerivativeKRR(solver="cholesky", **params).fit(train, energies, forces)
    cg = SVDDerivativeKRR(solver="cg", cg_tolerance=1e-10, **params).fit(train, energies, forces)
    assert cg.solve_info_.method == "cg" and cg.solve_info_.iterations > 0
    assert cg.solve_info_.residual < 1e-9
    np.testing.assert_allclose(cg.predict(test), dense.predict(test), rtol=0, atol=1e-8)
    capped = SVDDerivativeKRR(solver="cg", cg_tolerance=1e-10, cg_max_iter=20, **params)
    with pytest.warns(ConvergenceWarning, match="20 iterations"):
        capped.fit(train, energies, forces)
    assert capped.solve_info_.iterations == 20 < cg.solve_info_.iterations
    assert 1e-6 < capped.solve_info_.residual < 1e-2
    np.testing.assert_allclose(capped.predict(test), dense.predict(test), rtol=0, atol=1e-2)


def test_cg_that_diverges_on_an_indefinite_matrix_is_refused():
    # K + Lambda is indefinite at gamma = 0.3 (see the dense reference test): CG's
    # residual grows and its weights would predict energies off by tens of eV
    train, energies, forces = synthetic(6, 0)
    params = dict(gamma=0.3, lam=1e-5, lam_deriv=1e-3)
    model = SVDDerivativeKRR(**params).fit(train, energies, forces)
    before = model.predict(train)
    model.set_params(solver="cg", cg_tolerance=1e-10, cg_max_iter=50)
    with pytest.raises(np.linalg.LinAlgError, match="too far from a solution"):
        model.fit(train, energies, forces)
    assert model.solve_info_.residual > 1e-2
    np.testing.assert_array_equal(model.predict(train), before)  # the last fit stands


def test_energy_only_model_interpolates_its_training_data():
    train, energies, _ = synthetic(8, 4)
    model = SVDKernelKRR(gamma=1.0, lam=1e-10).fit(train, energies)
    np.testing.assert_allclose(model.predict(train), energies, atol=1e-6)
    mean = MeanPredictor().fit(train, energies)
    np.testing.assert_allclose(mean.predict(train[:2]), [energies.mean()] * 2)


def test_derivatives_beat_energies_only_on_a_smooth_function():
    train, energies, forces = synthetic(10, 6)
    test, test_energies, _ = synthetic(40, 7)
    grid = {"gamma_factor": [0.3, 1.0, 3.0], "lam": [1e-8, 1e-6, 1e-4]}
    errors = {}
    models = ((SVDKernelKRR(), {}), (SVDDerivativeKRR(), {"lam_deriv": [1e-6, 1e-4]}))
    for model, extra in models:
        selection = select_hyperparameters(model, train, energies, forces, {**grid, **extra})
        model.set_params(**selection.params).fit(train, energies, forces)
        errors[model.name] = np.sqrt(np.mean((model.predict(test) - test_energies) ** 2))
    assert errors["svd_deriv"] < 0.5 * errors["svd"]
    assert errors["svd"] < test_energies.std()


@pytest.mark.parametrize(
    "model, message",
    [
        (SVDKernelKRR(gamma=-1.0), "gamma must be a positive"),
        (SVDKernelKRR(gamma=0.0), "gamma must be a positive"),
        (EigenspectrumKRR([6, 1, 1, 8], gamma=np.inf), "gamma must be a positive"),
        (SVDKernelKRR(lam=-0.5), "lam must be a finite number of 0 or more"),
        (SVDKernelKRR(lam=np.nan), "lam must be a finite"),
        (SVDDerivativeKRR(lam_deriv=np.nan), "lam_deriv must be a finite"),
        (SVDDerivativeKRR(lam_deriv=-1e-3), "lam_deriv must be a finite"),
        (SVDDerivativeKRR(solver="cg", cg_tolerance=0.0), "cg_tolerance"),
        (SVDDerivativeKRR(solver="cg", cg_max_iter=0), "cg_max_iter"),
    ],
)
def test_bad_hyperparameters_are_refused(model, message):
    train, energies, forces = synthetic(4, 0)
    with pytest.raises(ValueError, match=message):
        model.fit(train, energies, forces)


def test_training_without_configurations_or_with_identical_ones_is_refused():
    train, energies, forces = synthetic(4, 0)
    for model in (MeanPredictor(), SVDKernelKRR(), SVDDerivativeKRR()):
        with pytest.raises(ValueError, match="no training configurations"):
            model.fit(train[:0], energies[:0], forces[:0])
    same = np.repeat(train[:1], 6, axis=0)  # no data scale for gamma
    for model in (SVDKernelKRR(), EigenspectrumKRR([6, 1, 1, 8])):
        with pytest.raises(ValueError, match="coincide"):
            select_hyperparameters(model, same, energies[[0] * 6])


def test_bad_input_is_refused():
    train, energies, forces = synthetic(4, 0)
    with pytest.raises(ValueError, match="forces"):
        SVDDerivativeKRR().fit(train, energies)
    with pytest.raises(ValueError, match="shape of positions"):
        SVDDerivativeKRR().fit(train, energies, forces[:, :2])
    bad = train.copy()
    bad[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SVDKernelKRR().fit(bad, energies)
    with pytest.raises(ValueError, match="atomic numbers"):
        EigenspectrumKRR().fit(train, energies)
    with pytest.raises(ValueError, match="atoms"):
        SVDKernelKRR().fit(train, energies).predict(train[:, :3])


# ---- model selection -------------------------------------------------------------
def test_folds_are_disjoint_and_cover_every_configuration():
    folds = configuration_folds(23, 4, random_state=0)
    tests = [test for _, test in folds]
    assert sorted(np.concatenate(tests)) == list(range(23))
    for train, test in folds:
        assert not set(train) & set(test)
        assert len(train) + len(test) == 23


def test_ridge_path_equals_direct_solves():
    train, energies, forces = synthetic(5, 8)
    model = SVDDerivativeKRR(gamma=0.6, lam=1e-6, lam_deriv=1e-3)
    K = model.covariance(train)
    y = model.observations(energies, forces, energies.mean())
    A = K + np.diag(model.regularisation(5, 4))
    lams = np.array([1e-6, 1e-3, 1.0])
    path = _ridge_path(A, np.arange(5) * 13, y, lams - lams[0])
    for lam, (alpha, logdet) in zip(lams, path):
        direct = K + np.diag(model.set_params(lam=lam).regularisation(5, 4))
        np.testing.assert_allclose(alpha, np.linalg.solve(direct, y), rtol=1e-8, atol=1e-10)
        assert logdet == pytest.approx(np.linalg.slogdet(direct)[1], abs=1e-8)


def test_evidence_is_the_profiled_gaussian_likelihood():
    train, energies, forces = synthetic(4, 9)
    model = SVDDerivativeKRR(gamma=0.6, lam=1e-4, lam_deriv=1e-3)
    K = model.covariance(train)
    noise = model.regularisation(4, 4)
    score = _evidence_scores(model, K, energies, forces, noise, [1e-4], 13)[0]
    y = model.observations(energies, forces, energies.mean())
    A = K + np.diag(noise)
    outputscale = y @ np.linalg.solve(A, y) / len(y)
    log_likelihood = multivariate_normal(np.zeros(len(y)), outputscale * A).logpdf(y)
    assert score == pytest.approx(-log_likelihood / len(y) - 0.5 * (np.log(2 * np.pi) + 1))


@pytest.mark.parametrize(
    "grid, message",
    [
        ({"gamma_factor": [1.0], "lam": [1e-6]}, "no lam_deriv"),
        ({"gamma_factor": [1.0], "lam_deriv": [1e-3]}, "no lam$"),
        ({"lam": [1e-6], "lam_deriv": [1e-3]}, "no gamma_factor"),
        (
            {"gamma_factor": [1.0], "lam": [1e-6], "lam_deriv": [1e-3], "lamda": [1.0]},
            "unknown 'lamda'",
        ),
        ({"gamma_factor": [1.0], "lam": [], "lam_deriv": [1e-3]}, "lam has no values"),
        ({"gamma_factor": [-1.0], "lam": [1e-6], "lam_deriv": [1e-3]}, "gamma_factor must be"),
        ({"gamma_factor": [1.0], "lam": [1e-6], "lam_deriv": [np.nan]}, "lam_deriv must be"),
    ],
)
def test_incomplete_or_bad_grids_are_refused(grid, message):
    train, energies, forces = synthetic(6, 3)
    with pytest.raises(ValueError, match=message):
        select_hyperparameters(SVDDerivativeKRR(lam_deriv=0.5), train, energies, forces, grid)


def test_selection_refuses_models_without_hyperparameters_and_bad_screens():
    train, energies, _ = synthetic(6, 3)
    with pytest.raises(ValueError, match="MeanPredictor has no hyperparameters"):
        select_hyperparameters(MeanPredictor(), train, energies)
    for screen in (0, -1, 1.5):
        with pytest.raises(ValueError, match="screen must be"):
            select_hyperparameters(SVDKernelKRR(), train, energies, screen=screen)


def test_cross_validated_selection_refits_what_a_naive_search_finds():
    train, energies, _ = synthetic(12, 10)
    grid = {"gamma_factor": [0.5, 2.0], "lam": [1e-6, 1e-2]}
    selection = select_hyperparameters(
        SVDKernelKRR(), train, energies, grid=grid, n_folds=3, random_state=0
    )
    folds = configuration_folds(12, 3, 0)
    for params, score in selection.scores:
        errors = np.concatenate(
            [
                SVDKernelKRR(**params).fit(train[a], energies[a]).predict(train[b]) - energies[b]
                for a, b in folds
            ]
        )
        assert score == pytest.approx(np.sqrt(np.mean(errors**2)), rel=1e-8)
    assert selection.score == min(score for _, score in selection.scores)


def test_screening_cross_validates_the_best_points_of_the_first_fold():
    train, energies, forces = synthetic(12, 12)
    grid = {"gamma_factor": [0.3, 1.0, 3.0], "lam": [1e-6, 1e-3], "lam_deriv": [1e-4, 1e-2]}
    model = SVDDerivativeKRR()
    full = select_hyperparameters(model, train, energies, forces, grid, n_folds=3)
    screened = select_hyperparameters(model, train, energies, forces, grid, n_folds=3, screen=2)
    # every first-fold score is a fresh fit (all lam from one factorisation by Woodbury)
    fit, held_out = configuration_folds(12, 3, 0)[0]
    assert len(screened.screening) == 12
    for params, score in screened.screening:
        predicted = SVDDerivativeKRR(**params).fit(train[fit], energies[fit], forces[fit])
        rmse = np.sqrt(np.mean((predicted.predict(train[held_out]) - energies[held_out]) ** 2))
        assert score == pytest.approx(rmse, rel=1e-8)

    def point(params):
        return params["gamma"], params["lam_deriv"]

    best_first = {}
    for params, score in screened.screening:
        best_first[point(params)] = min(score, best_first.get(point(params), np.inf))
    kept = sorted(best_first, key=best_first.get)[:2]
    assert sorted({point(params) for params, _ in screened.scores}) == sorted(kept)
    # the kept points have the scores of the full search, and the best of them wins
    full_scores = {tuple(params.values()): score for params, score in full.scores}
    for params, score in screened.scores:
        assert score == pytest.approx(full_scores[tuple(params.values())], rel=1e-10)
    assert screened.score == min(score for _, score in screened.scores)
    # screening searches a subset: it cannot beat the full search (up to rounding)
    assert screened.score >= full.score * (1.0 - 1e-12)


def test_outer_cross_validation_of_the_mean_predictor():
    positions, energies, forces = synthetic(15, 11)
    data = ConfigurationSet(np.array([6, 1, 1, 8]), BASE, positions, energies, forces)
    results = evaluate_model(data, "mean", n_folds=3, random_state=1)
    for result, (train, test) in zip(results, configuration_folds(15, 3, 1)):
        expected = np.sqrt(np.mean((energies[test] - energies[train].mean()) ** 2))
        assert result.rmse == pytest.approx(expected)
        assert result.training_size == 10


def test_zero_training_or_search_sizes_are_refused(tmp_path, capsys):
    # 0 meant "all" and --sizes 1 failed after the table, before --json was written
    positions, energies, forces = synthetic(12, 11)
    data = ConfigurationSet(np.array([6, 1, 1, 8]), BASE, positions, energies, forces)
    for option in ("training_size", "search_configs"):
        with pytest.raises(ValueError, match=f"{option} must be 1 or more"):
            evaluate_model(data, "svd", n_folds=3, **{option: 0})
    for option, value, needs in (
        ("--sizes", "1", "2 or more"),
        ("--search-configs", "0", "1 or more"),
        ("--screen", "0", "1 or more"),
    ):
        argv = ["bench", "prediction", "--molecule", "water", "--calc", "emt", "--configs"]
        argv += ["12", "--folds", "3", "--models", "mean", "svd", "--selection", "cv"]
        with pytest.raises(SystemExit):
            main([*argv, option, value, "--cache-dir", str(tmp_path)])
        assert f"{option}: must be a whole number of {needs}" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before any set was made


def test_benchmark_writes_rmse_per_model(tmp_path):
    out = tmp_path / "rmse.json"
    main(
        [
            "bench",
            "prediction",
            "--molecule",
            "water",
            "--calc",
            "emt",
            "--configs",
            "12",
            "--folds",
            "3",
            "--inner-folds",
            "3",
            "--sizes",
            "--screen",
            "3",
            "--cache-dir",
            str(tmp_path),
            "--json",
            str(out),
        ]
    )
    rmse = json.loads(out.read_text())
    assert set(rmse) == {
        "mean",
        "eigenspectrum",
        "eigenspectrum_ml",
        "svd",
        "svd_ml",
        "svd_deriv",
        "svd_deriv_ml",
    }
    assert all(np.isfinite(value) and value >= 0 for value in rmse.values())
    data = load_dataset("water", "emt", 12, cache_dir=tmp_path, generate=False)
    errors = [
        data.energies[test] - data.energies[train].mean()
        for train, test in configuration_folds(12, 3, 0)
    ]
    expected = np.mean([np.sqrt(np.mean(e**2)) for e in errors])
    assert rmse["mean"] == pytest.approx(expected)


def test_the_shipped_sets_are_found_without_a_cache(tmp_path):
    # the sets in asebo/data answer without any calculation; the GFN2-xTB one holds
    # GFN2-xTB's energies at its positions
    pytest.importorskip("tblite")
    from ase import Atoms

    from calculators import get_calculator

    for molecule, calculator in (("water", "gpaw"), ("glycerol", "gpaw:mode=lcao")):
        assert (
            load_dataset(molecule, calculator, 100, cache_dir=tmp_path, generate=False).n_labelled
            == 100
        )
    shipped = load_dataset("water", "gfn2", 3, cache_dir=tmp_path, generate=False)
    assert not any(tmp_path.iterdir())  # nothing computed, nothing cached
    for positions, energy in zip(shipped.positions, shipped.energies):
        atoms = Atoms(shipped.numbers, positions)
        atoms.calc = get_calculator("gfn2")
        assert atoms.get_potential_energy() == pytest.approx(energy, abs=1e-6)
