"""Primitive internal coordinates: values, Wilson B matrix against finite differences,
the faded twist, the out-of-plane angle, and the internal-coordinate metric."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_gp import assert_posterior_gradients_match_finite_differences
from test_metric import (
    assert_pullback_matches_finite_differences,
    ethanol_observations,
    random_rotation,
    rattled,
)

from asebo.kernels.added_terms import CurvatureTerm
from asebo.model.gp import CalculatorPrior, EnergyForceGP
from asebo.model.internals import (
    AtomScatter,
    PrimitiveInternals,
    _dihedrals_and_fades,
    bend_angles,
    dihedral_angles,
    faded_torsions,
    out_of_plane_angles,
    wrap,
)
from asebo.model.lindh import LindhModel, lindh_weights, out_of_plane_quadruples
from asebo.model.metric import InternalMetric, model_hessian
from asebo.optimize.representations import InternalCoordinates


def primitives_of(name):
    atoms = molecule(name)
    model = LindhModel(atoms.positions, atoms.numbers)
    rho = lindh_weights(atoms.positions, atoms.numbers)
    planes, _ = out_of_plane_quadruples(rho, model.cutoff)
    primitives = PrimitiveInternals(
        model.stretches, model.bends, model.torsions, planes, atoms.positions
    )
    return atoms, model, primitives


@pytest.mark.parametrize("name", ["CH3CH2OH", "CH3CONH2"])
def test_wilson_b_matches_finite_differences(name):
    atoms, _, primitives = primitives_of(name)
    assert len(primitives.out_of_planes) > 0
    x = torch.as_tensor(rattled(name, scale=0.08, seed=1))  # (1, n, 3)
    _, derivatives = primitives.values_and_derivatives(x)
    B = primitives.wilson_b(derivatives)[0]  # (d, 3n)
    h = 1e-6
    for i in range(0, x.numel(), 5):
        step = torch.zeros(x.numel(), dtype=torch.float64)
        step[i] = h
        plus = primitives.values_and_derivatives(x + step.reshape(x.shape))[0][0]
        minus = primitives.values_and_derivatives(x - step.reshape(x.shape))[0][0]
        torch.testing.assert_close(B[:, i], (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)


def test_transpose_product_is_b_transpose_times_the_weights():
    _, _, primitives = primitives_of("CH3CH2OH")
    x = torch.as_tensor(rattled("CH3CH2OH", seed=2, m=3))
    _, derivatives = primitives.values_and_derivatives(x)
    weights = torch.as_tensor(np.random.default_rng(3).normal(size=(3, len(primitives))))
    expected = torch.einsum("bdk,bd->bk", primitives.wilson_b(derivatives), weights)
    torch.testing.assert_close(
        primitives.transpose_product(derivatives, weights).reshape(3, -1), expected
    )


def test_left_product_is_the_matrix_times_the_dense_b():
    _, _, primitives = primitives_of("CH3CH2OH")
    x = torch.as_tensor(rattled("CH3CH2OH", seed=5, m=1))
    _, derivatives = primitives.values_and_derivatives(x)
    matrix = torch.as_tensor(np.random.default_rng(6).normal(size=(7, len(primitives))))
    expected = matrix @ primitives.wilson_b(derivatives)[0]
    torch.testing.assert_close(primitives.left_product(matrix, derivatives), expected)


def test_atom_scatter_is_b_transpose_times_the_weights_at_every_batch_size():
    # the scatter keeps where the entries of one configuration land; a batch offsets
    # them by configuration
    _, _, primitives = primitives_of("CH3CH2OH")
    scatter = AtomScatter(primitives.atoms.numpy(), primitives.n_atoms)
    rng = np.random.default_rng(4)
    for b in (1, 3, 1, 2):
        x = torch.as_tensor(rattled("CH3CH2OH", seed=b, m=b))
        _, derivatives = primitives.values_and_derivatives(x)
        weights = torch.as_tensor(rng.normal(size=(b, len(primitives))))
        expected = torch.einsum("bdk,bd->bk", primitives.wilson_b(derivatives), weights)
        torch.testing.assert_close(scatter(weights, derivatives).reshape(b, -1), expected)


def test_torsions_kept_from_the_latest_call_are_those_of_the_configurations_asked():
    # faded_torsions keeps the part of its latest call that does not depend on the
    # reference: another reference, the configurations moved in place, and fewer of
    # them must each give what the torsions of those configurations are
    _, _, primitives = primitives_of("CH3CH2OH")
    torsions, reference = primitives.torsions, primitives.reference_dihedrals
    x = torch.as_tensor(rattled("CH3CH2OH", scale=0.1, seed=5, m=2))

    def assert_fresh(x, reference):
        twist, fade, d_twist, d_fade = faded_torsions(x, torsions, reference)
        angle, expected_fade, expected_d_twist, expected_d_fade = _dihedrals_and_fades(
            x.clone(), torsions.clone()
        )
        torch.testing.assert_close(twist, wrap(dihedral_angles(x, torsions)[0] - reference))
        torch.testing.assert_close(twist, wrap(angle - reference))
        for kept, fresh in zip(
            (fade, d_twist, d_fade), (expected_fade, expected_d_twist, expected_d_fade)
        ):
            assert torch.equal(kept, fresh)

    assert_fresh(x, reference)
    assert_fresh(x, reference + 0.3)
    x[1, 0, 2] += 0.2
    assert_fresh(x, reference)
    assert_fresh(x[:1], reference)


QUADRUPLE = torch.tensor([[0, 1, 2, 3]])


def faded_twist(points, reference):
    """``g * twist`` (scalar) of the one quadruple ``points`` (4, 3) from ``reference``."""
    twist, fade, _, _ = faded_torsions(points, QUADRUPLE, reference.reshape(1))
    return (fade * twist)[0]


def test_bond_angle_and_twist_are_the_geometric_values():
    # a right angle, and a dihedral of 60 degrees with both bends at 90 degrees
    points = torch.tensor([[1.0, 0, 0], [0, 0, 0], [0, 1, 0], [0.5, 1, 3**0.5 / 2]]).double()
    assert bend_angles(points, torch.tensor([[0, 1, 2]]))[0].item() == pytest.approx(np.pi / 2)
    dihedral = dihedral_angles(points, QUADRUPLE)[0].item()
    assert abs(dihedral) == pytest.approx(np.pi / 3)
    assert faded_twist(points, torch.tensor(0.0, dtype=torch.float64)).item() == pytest.approx(
        dihedral
    )
    # measured from a reference and wrapped: 170 and -170 degrees are 20 degrees apart
    reference = torch.tensor(np.radians(170.0) + dihedral, dtype=torch.float64)
    assert faded_twist(points, reference).item() == pytest.approx(np.radians(-170.0))
    reference = torch.tensor(np.radians(-170.0) + dihedral, dtype=torch.float64)
    assert faded_twist(points, reference).item() == pytest.approx(np.radians(170.0))


def test_dihedral_and_fade_derivatives_match_autograd():
    # the closed forms (Blondel and Karplus; the quintic switch) against automatic
    # differentiation of the same values, inside the fade of the bend at atom 1
    angle = np.radians(150.0)
    points = torch.tensor(
        [[np.cos(angle), np.sin(angle), 0.0], [0, 0, 0], [-1.0, 0, 0], [-1.5, 0.5, 0.7]],
        dtype=torch.float64,
    )
    reference = torch.tensor([0.3], dtype=torch.float64)
    _, fade, d_twist, d_fade = faded_torsions(points, QUADRUPLE, reference)
    assert 0.0 < fade.item() < 1.0
    for index, derivative in enumerate((d_twist, d_fade)):
        automatic = torch.func.grad(
            lambda p, i=index: faded_torsions(p, QUADRUPLE, reference)[i][0]
        )(points)
        torch.testing.assert_close(derivative[0], automatic, rtol=1e-10, atol=1e-12)


def test_faded_twist_is_smooth_where_the_dihedral_is_undefined():
    # straighten the bend at atom 1 through 180 degrees: the bare dihedral's derivative
    # diverges, the faded twist goes to zero with a bounded derivative
    def points(angle):
        return torch.tensor(
            [
                [np.cos(angle), np.sin(angle), 0.0],
                [0.0, 0.0, 0.0],
                [-1.0, 0.0, 0.0],
                [-1.5, 0.5, 0.7],
            ],
            dtype=torch.float64,
        )

    reference = torch.tensor(0.3, dtype=torch.float64)
    norms = []
    for angle in np.radians([150, 170, 179]):
        twist, fade, d_twist, d_fade = faded_torsions(points(angle), QUADRUPLE, reference)
        norms.append((fade[0] * d_twist[0] + twist[0] * d_fade[0]).norm().item())
    assert max(norms) < 20.0
    assert faded_twist(points(np.radians(179.0)), reference).item() == 0.0
    _, bare = dihedral_angles(points(np.radians(179.9)), QUADRUPLE)
    assert bare.norm().item() > 100.0


def test_out_of_plane_is_the_sine_of_the_angle_to_the_plane():
    angle = np.radians(25.0)
    points = torch.tensor(
        [[1.0, 0, 0], [0, 0, 0], [0, 1, 0], [-np.cos(angle), 0, np.sin(angle)]],
        dtype=torch.float64,
    )
    sine, _ = out_of_plane_angles(points[None], torch.arange(4)[None])
    assert sine.item() == pytest.approx(np.sin(angle))


def test_out_of_plane_derivatives_match_finite_differences():
    rng = np.random.default_rng(4)
    x = torch.as_tensor(rng.normal(size=(2, 6, 3)))  # two configurations of six atoms
    quadruples = torch.tensor([[0, 1, 2, 3], [4, 1, 5, 0], [2, 3, 4, 5]])
    _, derivatives = out_of_plane_angles(x, quadruples)  # (2, 3, 4, 3)
    h = 1e-6
    for q, quadruple in enumerate(quadruples):
        for slot, atom in enumerate(quadruple):
            for axis in range(3):
                shift = torch.zeros_like(x)
                shift[:, atom, axis] = h
                up, _ = out_of_plane_angles(x + shift, quadruple[None])
                down, _ = out_of_plane_angles(x - shift, quadruple[None])
                numeric = (up - down)[:, 0] / (2 * h)  # (2,)
                assert torch.allclose(derivatives[:, q, slot, axis], numeric, atol=1e-7)


@pytest.fixture(scope="module")
def ethanol_internal():
    atoms = molecule("CH3CH2OH")
    model = LindhModel(atoms.positions, atoms.numbers)
    return model, InternalMetric.from_model(model, atoms.positions)


def test_features_are_invariant_and_zero_at_the_reference(ethanol_internal):
    _, metric = ethanol_internal
    reference = molecule("CH3CH2OH").positions
    assert metric.features(reference[None]).abs().max() < 1e-12
    x = rattled("CH3CH2OH", seed=4)
    moved = x @ random_rotation(5).T + np.array([1.0, -2.0, 0.5])
    torch.testing.assert_close(metric.features(moved), metric.features(x), rtol=0, atol=1e-12)
    assert metric.features(x).reshape(-1)[-6:].abs().max() == 0.0  # the padding


@pytest.mark.parametrize("power", [0.0, 0.5])
@pytest.mark.parametrize("name", ["H2O", "SO2", "HCO"])
def test_metric_at_the_reference_is_the_normalised_hessian_power(name, power):
    # without out-of-plane terms the weighted primitives are the model's, so that
    # J^T J at the reference is the model Hessian's vibrations to this power
    atoms = molecule(name)
    model = LindhModel(atoms.positions, atoms.numbers)
    metric = InternalMetric(model, atoms.positions, power)
    assert len(metric.primitives.out_of_planes) == 0
    _, derivatives = metric.primitives.values_and_derivatives(
        torch.as_tensor(atoms.positions)[None]
    )
    J = (metric.transform @ metric.primitives.wilson_b(derivatives)[0]).numpy()  # (r, 3n)
    eigenvalues, vectors = np.linalg.eigh(model_hessian(model, atoms.positions))
    scales = eigenvalues[6:] ** power
    scales /= np.exp(np.log(scales).mean())
    expected = vectors[:, 6:] @ np.diag(scales) @ vectors[:, 6:].T
    np.testing.assert_allclose(J.T @ J, expected, atol=1e-6 * expected.max())


def test_delocalized_coordinates_are_orthogonal_with_unit_geometric_mean(ethanol_internal):
    # J J^T = S^2 at the reference, S the normalised scales
    _, metric = ethanol_internal
    x = torch.as_tensor(molecule("CH3CH2OH").positions)[None]
    _, derivatives = metric.primitives.values_and_derivatives(x)
    J = metric.transform @ metric.primitives.wilson_b(derivatives)[0]
    gram = (J @ J.T).numpy()
    np.testing.assert_allclose(gram, np.diag(np.diag(gram)), atol=1e-10)
    assert np.log(np.diag(gram)).mean() == pytest.approx(0.0, abs=1e-10)


def test_feature_gradients_and_pullback_invert_each_other(ethanol_internal):
    model, metric = ethanol_internal
    x = rattled("CH3CH2OH", seed=6) @ random_rotation(7).T
    _, forces = model.energy_and_forces(x[0])
    in_features = metric.feature_gradients(x, -forces[None])
    _, pullback = metric.features_and_pullback(torch.as_tensor(x))
    np.testing.assert_allclose(pullback(in_features)[0].numpy(), -forces[None], atol=1e-9)


def test_pullback_is_the_chain_rule_through_the_internal_coordinates(ethanol_internal):
    _, metric = ethanol_internal
    assert_pullback_matches_finite_differences(metric, rattled("CH3CH2OH", seed=8))


@pytest.mark.parametrize("name", ["C2H2", "C3H4_D2d", "H2"])
def test_molecules_the_internal_coordinates_cannot_describe_are_refused(name):
    atoms = molecule(name)
    atoms.rattle(0.02, seed=0)
    with pytest.raises(ValueError):
        InternalMetric(LindhModel(atoms.positions, atoms.numbers), atoms.positions)


def ethanol_internal_gp(**options):
    """Observations of ethanol, and a GP on its internal features with a Lindh prior
    and a linear trend fitted to them."""
    P, E, F = ethanol_observations(5)
    model = LindhModel(P[0], molecule("CH3CH2OH").numbers)
    gp = EnergyForceGP(
        kernel="cartesian",
        metric=InternalMetric(model, P[0]),
        prior=CalculatorPrior(model, molecule("CH3CH2OH")),
        trend=30.0,
        **options,
    )
    return P, E, F, gp.fit(P, E, F)


def test_gp_with_internal_features_and_a_trend_is_invariant_and_differentiable():
    P, E, F, gp = ethanol_internal_gp()
    mean, gradient = gp.predict(P, return_gradient=True)
    assert np.abs(mean - E).max() < 1e-3
    assert np.abs(gradient + F).max() < 0.02 * np.abs(F).max()
    x = P[1] + 0.03 * np.random.default_rng(12).normal(size=P[1].shape)
    Q = random_rotation(13)
    mean, std, gradient = gp.predict(x, return_std=True, return_gradient=True)
    moved = gp.predict(x @ Q.T + 0.5, return_std=True, return_gradient=True)
    assert moved[0] == pytest.approx(mean, abs=1e-9)
    assert moved[1] == pytest.approx(std, rel=1e-7)
    np.testing.assert_allclose(moved[2], gradient @ Q.T, atol=1e-8)
    assert_posterior_gradients_match_finite_differences(gp, x, [(0, 0), (4, 2), (7, 1)])


def test_the_mean_without_the_variance_is_the_full_posteriors_to_the_last_bit():
    # a Hessian by differences asks for the mean's gradient alone: the prior's
    # curvature term, added after the pullback, must enter it as in the full posterior
    P, _, _, gp = ethanol_internal_gp(prior_curvature=1.0)
    x = torch.as_tensor(P[1:4] + 0.03 * np.random.default_rng(14).normal(size=P[1:4].shape))
    mean, variance, gradient, variance_gradient = gp.posterior_with_gradients(x)
    alone = gp.posterior_with_gradients(x, with_variance=False)
    assert alone[1] is None and alone[3] is None
    assert torch.equal(alone[0], mean) and torch.equal(alone[2], gradient)
    assert any(isinstance(term, CurvatureTerm) for term in gp._added_terms(gp.gamma_))


def formaldehyde_inverted(shift):
    """Formaldehyde with its carbon moved ``shift`` Å out of the plane of O, H, H."""
    atoms = molecule("H2CO")  # O, C, H, H in the yz plane
    atoms.positions[1, 0] += shift
    return atoms


def test_conditioning_is_one_at_the_reference_and_the_jacobians_singular_value_ratio():
    reference = formaldehyde_inverted(0.3)
    metric = InternalMetric(LindhModel(reference.positions, reference.numbers), reference.positions)
    assert metric.conditioning(reference.positions) == pytest.approx(1.0, abs=1e-12)

    def smallest_singular_value(x, h=1e-6):
        columns = []
        for i in range(x.size):
            step = np.zeros(x.size)
            step[i] = h
            step = step.reshape(x.shape)
            up, down = metric.features(np.stack([x + step, x - step]))
            columns.append((up - down).reshape(-1)[: metric.rank].numpy() / (2 * h))
        return np.linalg.svd(np.array(columns), compute_uv=False)[-1]

    x = formaldehyde_inverted(0.1).positions
    x += 0.02 * np.random.default_rng(0).normal(size=x.shape)
    expected = smallest_singular_value(x) / smallest_singular_value(reference.positions)
    assert metric.conditioning(x) == pytest.approx(expected, rel=1e-6)


def test_internal_coordinates_of_a_pyramidal_reference_fold_past_the_plane():
    """Built where the carbon is pyramidal, the features lose a direction just past the
    planar configuration; built at the planar one, they do not along the same path."""
    shifts = np.linspace(0.3, -0.3, 25)
    path = [formaldehyde_inverted(shift).positions for shift in shifts]
    numbers = formaldehyde_inverted(0.0).numbers
    pyramidal = InternalMetric(LindhModel(path[0], numbers), path[0])
    planar = InternalMetric(LindhModel(path[12], numbers), path[12])
    assert min(pyramidal.conditioning(x) for x in path) < InternalCoordinates().folded / 2
    assert min(planar.conditioning(x) for x in path) > 0.5


def test_pullback_of_several_gradients_is_that_of_each_alone(ethanol_internal):
    # the gradients share one product with the transform: each must come back as
    # J^T g of its own configuration, in the order given
    _, metric = ethanol_internal
    x = torch.as_tensor(rattled("CH3CH2OH", seed=8, m=3))
    features, pullback = metric.features_and_pullback(x)
    rng = np.random.default_rng(9)
    gradients = [torch.as_tensor(rng.normal(size=features.shape)) for _ in range(3)]
    together = pullback(*gradients)
    _, derivatives = metric.primitives.values_and_derivatives(x)
    for gradient, pulled in zip(gradients, together):
        for i in range(len(x)):
            J = metric.transform @ metric.primitives.wilson_b(derivatives[i : i + 1])[0]
            expected = J.T @ gradient[i].reshape(-1)[: metric.rank]
            torch.testing.assert_close(pulled[i].reshape(-1), expected)
