"""Unit tests of lib.lipschitz: known answers for the optimiser, theorems, layers, the AOL prior
design, training, certification and the audits, and a table of bad calls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from lib import lipschitz as lip

torch.set_num_threads(1)


def skew(n: int, norm: float, seed: int = 0) -> torch.Tensor:
    """A random skew-symmetric float64 matrix with Frobenius norm `norm`."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    A = A - A.T
    return A * norm / torch.linalg.matrix_norm(A)


def random_orthogonal(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]


def operator_norm(f, shape: tuple[int, ...]) -> float:
    """Spectral norm of a linear map f on tensors of `shape`, from its full matrix."""
    n = math.prod(shape)
    basis = torch.eye(n, dtype=torch.float64).reshape(n, *shape)
    return float(torch.linalg.matrix_norm(f(basis).reshape(n, -1), ord=2))


# --- FastExp, polar retraction, the manifold optimiser ----------------------------------------


@pytest.mark.parametrize(("norm", "order"), [(0.03, 2), (0.2, 3), (0.8, 4)])
def test_fast_exp_within_taylor_truncation_bound(norm, order):
    A = skew(12, norm)
    err = torch.linalg.matrix_norm(lip.fast_exp(A) - torch.tensor(scipy.linalg.expm(A.numpy())))
    # Remainder of the order-k Taylor series: ||A||^{k+1} / (k+1)! e^{||A||}.
    bound = norm ** (order + 1) / math.factorial(order + 1) * math.exp(norm)
    assert float(err) <= bound
    assert float(err) > 1e-3 * bound  # the truncation really is of that order (not exact expm)
    assert lip.orthogonality_error(lip.fast_exp(A)) <= 3 * bound


def test_fast_exp_is_exact_above_the_last_threshold_and_batched():
    A = torch.stack([skew(6, 1.5, 1), skew(6, 0.01, 2)])
    expected = torch.tensor(np.stack([scipy.linalg.expm(a) for a in A.numpy()]))
    torch.testing.assert_close(lip.fast_exp(A), expected, atol=1e-12, rtol=0)


def test_polar_returns_the_orthogonal_factor():
    Q = random_orthogonal(7)
    S = torch.diag(torch.tensor([0.5, 1, 2, 3, 1.1, 0.9, 4], dtype=torch.float64))
    P = random_orthogonal(7, 1)
    torch.testing.assert_close(lip.polar(Q @ P @ S @ P.T), Q)  # X = Q (P S P^T), sym. pos. def.
    assert lip.orthogonality_error(lip.polar(torch.randn(3, 5, 5))) < 1e-6


def test_orthogonal_adam_finds_the_target_rotation_and_stays_on_the_manifold():
    T = torch.linalg.matrix_exp(skew(8, 1.0, 3))  # target in SO(8), reachable from I
    X = torch.nn.Parameter(torch.eye(8, dtype=torch.float64))
    opt = lip.OrthogonalAdam([X], lr=0.05)
    for _ in range(300):
        opt.zero_grad()
        (-(T * X).sum()).backward()  # -trace(T^T X), minimised over O(n) at X = T
        opt.step()
    drift = opt.retract()
    assert 1e-10 < drift < 1e-3  # FastExp drifts off O(n) a little ...
    assert lip.orthogonality_error(X) < 1e-12  # ... and the retraction puts it back
    assert float(torch.linalg.matrix_norm(X.detach() - T)) < 1e-2


# --- Theorems 1 and 2 and the layers ---------------------------------------------------------


def test_theorem1_only_signed_one_hot_kernels_are_isometric():
    for sign in (1, -1):
        for pos in [(0, 0), (1, 2), (2, 1)]:
            K = np.zeros((3, 3))
            K[pos] = sign
            np.testing.assert_allclose(lip.kernel_gain(K, 5), 1.0, atol=1e-12)
    for K in (
        np.array([[0.5, 0.5]]),
        np.random.default_rng(0).normal(size=(3, 3)),
        np.array([[0.6, 0.8]]),
    ):  # unit-norm but two taps: still not an isometry
        gain = lip.kernel_gain(K, 5)
        assert gain.max() - gain.min() > 0.1


def test_theorem2_beta_abs_is_minmax_in_a_rotated_basis():
    R = lip.theorem2_basis(5)
    torch.testing.assert_close(R.T @ R, torch.eye(10, dtype=torch.float64))
    x = torch.randn(200, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(lip.beta_abs(x @ R.T, 0.5) @ R, lip.minmax(x), atol=1e-12, rtol=0)


def test_layers_known_values_and_norms():
    torch.testing.assert_close(
        lip.beta_abs(torch.tensor([-1.0, -2, -3, -4])), torch.tensor([1.0, 2, -3, -4])
    )
    torch.testing.assert_close(
        lip.minmax(torch.tensor([[1.0], [5.0], [4.0], [2.0]]), dim=0),
        torch.tensor([[4.0], [5.0], [1.0], [2.0]]),
    )
    img = torch.arange(64.0).reshape(1, 8, 8)
    tokens = lip.patchify(img)
    assert tokens.shape == (1, 4, 4, 4)
    torch.testing.assert_close(tokens[0, 0, 0], torch.tensor([0.0, 1, 8, 9]))
    torch.testing.assert_close(tokens[0, 1, 2], torch.tensor([20.0, 21, 28, 29]))
    x = torch.randn(3, 4, 4, 16, dtype=torch.float64)
    s = lip.spatial_shift(x, 1 / 8)
    torch.testing.assert_close(torch.sort(s.flatten()).values, torch.sort(x.flatten()).values)
    torch.testing.assert_close(s[:, 1, :, 0], x[:, 0, :, 0])  # group 1 moved down one row
    torch.testing.assert_close(s[..., 8:], x[..., 8:])  # unshifted channels
    torch.testing.assert_close(lip.l2_pool(torch.ones(2, 4, 4, 3)), torch.full((2, 3), 4.0))
    y = torch.randn(3, 4, 4, 16, dtype=torch.float64)
    ratio = torch.linalg.vector_norm(
        lip.l2_pool(x) - lip.l2_pool(y), dim=1
    ) / torch.linalg.vector_norm((x - y).flatten(1), dim=1)
    assert (ratio <= 1).all()


def test_lipnext_backbone_is_1_lipschitz_and_head_free():
    for m in ("manifold", "cayley"):
        model = lip.LipNeXt(lip.LipNeXtConfig(C=8, L=3, alpha=1 / 8, orthogonal_map=m), 0).double()
        with torch.no_grad():
            model.p.normal_()
            model.b.normal_()
        x = torch.rand(20, 8, 8, dtype=torch.float64)
        assert lip.jacobian_spectral_norms(model.backbone, x).max() <= 1 + 1e-9
        assert model(x).shape == (20, 10)


# --- The AOL prior design (Prach & Lampert 2022) ---------------------------------------------


def test_aol_scale_of_a_1x1_kernel_is_theorem_1():
    """A 1x1 convolution is the matrix P: d_i = (sum_j |P^T P|_ij)^{-1/2} and ||P D||_2 <= 1."""
    P = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    d = lip.aol_scale(P[:, :, None, None])
    torch.testing.assert_close(d, (P.T @ P).abs().sum(1).rsqrt())
    assert float(torch.linalg.matrix_norm(P * d, ord=2)) <= 1 + 1e-12
    K = torch.zeros(3, 3, 3, 3, dtype=torch.float64)
    K[:, :, 1, 1] = torch.eye(3)
    torch.testing.assert_close(lip.aol_scale(K), torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aol_rescaled_convolution_is_1_lipschitz_with_zero_padding(seed):
    K = torch.randn(6, 4, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    Kd = K * lip.aol_scale(K)[None, :, None, None]
    norm = operator_norm(lambda z: torch.nn.functional.conv2d(z, Kd, padding=1), (4, 4, 4))
    assert 0.5 < norm <= 1 + 1e-12  # bounded by 1, and not trivially small
    assert operator_norm(lambda z: torch.nn.functional.conv2d(z, K, padding=1), (4, 4, 4)) > 1


def test_aol_network_is_1_lipschitz_and_matches_lipnext_in_size():
    model = lip.AOLNet(lip.AOLConfig(C=8, L=3), 0).double()
    with torch.no_grad():
        model.kernel.normal_()
        model.b.normal_()
    x = torch.rand(10, 8, 8, dtype=torch.float64)
    assert lip.jacobian_spectral_norms(model.backbone, x).max() <= 1 + 1e-9
    assert model(x).shape == (10, 10)
    n_lipnext = lip.count_parameters(lip.build_model(lip.LipNeXtConfig(C=32)))
    n_aol = lip.count_parameters(lip.build_model(lip.AOLConfig(C=16, L=5)))
    assert n_lipnext == 13 * 32**2 + 6 * 16 + 6 * 32 + 330  # orthogonal stack, p, b, head
    assert n_aol == 5 * 9 * 16**2 + 5 * 16 + 2570  # kernels, biases, head on 256 features
    assert abs(n_aol / n_lipnext - 1) < 0.03


# --- Training, certification and the audits --------------------------------------------------


def test_training_runs_on_the_manifold_and_certifies():
    data = lip.load_digits_split(n_test=1597, seed=0)  # 200 training digits keep the test fast
    recipe = lip.Recipe(epochs=6, batch=20, lr=3e-2)
    res = lip.train_model(lip.LipNeXt(lip.LipNeXtConfig(C=8, L=2)), data, recipe)
    assert lip.orthogonality_error(res.model.orth.weight) < 1e-5
    assert 0 < res.error_before_retraction < 1e-2
    with torch.no_grad():
        j, r = lip.head_aware_radius(res.model(data.X_test), res.model.head.weight)
    assert lip.certified_accuracy(j, r, data.y_test, 0.0) > 0.3  # better than chance (0.1)


def test_train_and_certify_is_deterministic_and_rebuilds_the_model():
    grid = np.array([0.0, 0.5])
    cfg, recipe = lip.AOLConfig(C=8, L=2), lip.Recipe(epochs=1, lr=3e-3)
    a, b = (lip.train_and_certify(cfg, recipe, 3, 4, grid) for _ in range(2))
    np.testing.assert_array_equal(a.cra, b.cra)
    assert a.cra[0] >= a.cra[1] and math.isnan(a.error_before_retraction)
    data = lip.load_digits_split(seed=3)
    model = lip.trained_model(a)
    with torch.no_grad():
        pred, radius = lip.head_aware_radius(model(data.X_test.double()), model.head.weight)
    torch.testing.assert_close(radius, a.radius)
    assert (pred == a.pred).all()


def test_head_aware_radius_known_answer_and_dominates_generic():
    W = torch.eye(3, dtype=torch.float64)
    z = torch.tensor([[3.0, 1.0, 0.0], [0.0, 0.5, 2.5]], dtype=torch.float64)
    j, r = lip.head_aware_radius(z, W)
    torch.testing.assert_close(j, torch.tensor([0, 2]))
    torch.testing.assert_close(r, torch.tensor([2.0, 2.0], dtype=torch.float64) / math.sqrt(2))
    g = torch.Generator().manual_seed(0)
    W, z = torch.randn(10, 16, generator=g), torch.randn(300, 10, generator=g)
    _, r = lip.head_aware_radius(z, W)
    _, r_gen = lip.generic_radius(z, float(torch.linalg.matrix_norm(W, 2)))
    assert (r >= r_gen - 1e-6).all() and (r > r_gen * 1.2).any()
    torch.testing.assert_close(lip.gloro_logits(z[:2], W, torch.tensor([1, 1]), 0.0), z[:2])


def test_pgd_matches_the_exact_radius_of_a_linear_classifier():
    g = torch.Generator().manual_seed(0)  # two classes: the margin loss points at the boundary
    W, c = torch.randn(2, 6, generator=g, dtype=torch.float64), torch.randn(2, dtype=torch.float64)

    def f(x):
        return x @ W.T + c

    x = torch.randn(40, 6, generator=g, dtype=torch.float64)
    j, r = lip.head_aware_radius(f(x), W)  # exact for a linear model: distance to the boundary
    assert not lip.pgd_l2(f, x, j, 0.99 * r, steps=50, restarts=2).any()
    assert lip.pgd_l2(f, x, j, 1.01 * r, steps=50, restarts=2).all()


def test_lipschitz_audits_can_fail():
    A = torch.diag(torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64))

    def f(x):
        return x @ A.T

    x = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(
        lip.jacobian_spectral_norms(f, x), torch.full((5,), 2.0, dtype=torch.float64)
    )
    assert 1.9 < lip.lipschitz_ratio_ascent(f, x, steps=50) <= 2 + 1e-9


# --- Bad input: every public function names the argument and what to pass -------------------

Z2 = torch.zeros(2, 3)
LABELS = torch.zeros(2, dtype=torch.long)
NAN = float("nan")
RUN_GRID = np.array([0.0, 0.5])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: lip.fast_exp(torch.zeros(3, 4)), ValueError, "A must be"),
        (lambda: lip.fast_exp(torch.full((2, 2), NAN)), ValueError, "A contains NaN"),
        (lambda: lip.fast_exp(np.zeros((2, 2))), TypeError, "A must be a floating-point"),
        (lambda: lip.polar(torch.zeros(3)), ValueError, "X must have >= 2 axes"),
        (lambda: lip.orthogonality_error(torch.zeros(2, 2, dtype=torch.long)), TypeError, "Q"),
        (
            lambda: lip.OrthogonalAdam([torch.nn.Parameter(torch.eye(2))], lr=-1.0),
            ValueError,
            "lr must lie",
        ),
        (
            lambda: lip.OrthogonalAdam([torch.nn.Parameter(torch.eye(2))], lr=True),
            TypeError,
            "lr must be a real",
        ),
        (
            lambda: lip.OrthogonalAdam([torch.nn.Parameter(torch.eye(2))], betas=(0.9, 1.0)),
            ValueError,
            "betas[1]",
        ),
        (lambda: lip.spatial_shift(torch.zeros(1, 4, 4, 4), 0.5), ValueError, "alpha must lie"),
        (lambda: lip.spatial_shift(torch.zeros(1, 4, 4, 4), 1 / 8), ValueError, "shifts 0"),
        (lambda: lip.beta_abs(torch.zeros(4), 1.5), ValueError, "beta must lie"),
        (lambda: lip.beta_abs(torch.zeros(4), NAN), ValueError, "beta must be finite"),
        (lambda: lip.minmax(torch.zeros(3)), ValueError, "even number"),
        (lambda: lip.minmax(torch.zeros(4), dim=2), ValueError, "dim must be <="),
        (lambda: lip.theorem2_basis(0), ValueError, "d must be >= 1"),
        (lambda: lip.theorem2_basis(2.0), TypeError, "d must be an integer"),
        (lambda: lip.kernel_gain(np.ones((6, 6)), 4), ValueError, "does not fit"),
        (lambda: lip.kernel_gain(np.array([[NAN]]), 4), ValueError, "K contains NaN"),
        (lambda: lip.l2_pool(torch.zeros(4, 4, 4)), ValueError, "x must have >= 4 axes"),
        (lambda: lip.patchify(torch.zeros(1, 7, 7)), ValueError, "divisible by patch"),
        (lambda: lip.patchify(torch.zeros(1, 8, 8), patch=0), ValueError, "patch must be >= 1"),
        (lambda: lip.LipNeXtConfig(orthogonal_map="householder"), ValueError, "orthogonal_map"),
        (lambda: lip.LipNeXtConfig(C=2), ValueError, "C=2 must be >= patch^2"),
        (lambda: lip.LipNeXtConfig(C=4, alpha=1 / 8), ValueError, "shifts no channel"),
        (lambda: lip.LipNeXtConfig(L=True), TypeError, "L must be an integer"),
        (lambda: lip.AOLConfig(C=15), ValueError, "must be even"),
        (lambda: lip.AOLConfig(kernel=2), ValueError, "kernel=2 must be odd"),
        (lambda: lip.AOLConfig(pool="max"), ValueError, "pool must be one of"),
        (lambda: lip.LipNeXt(lip.LipNeXtConfig(), seed=-1), ValueError, "seed must be >= 0"),
        (lambda: lip.build_model({"C": 32}), TypeError, "cfg must be a LipNeXtConfig"),
        (lambda: lip.count_parameters("model"), TypeError, "model must be a torch"),
        (lambda: lip.aol_scale(torch.zeros(3, 3)), ValueError, "K must have >= 4 axes"),
        (lambda: lip.load_digits_split(n_test=5000), ValueError, "n_test must be <="),
        (lambda: lip.load_digits_split(seed=1.5), TypeError, "seed must be an integer"),
        (lambda: lip.gloro_logits(Z2, torch.zeros(3, 4), LABELS, -1.0), ValueError, "eps must"),
        (lambda: lip.gloro_logits(Z2, torch.zeros(2, 4), LABELS, 0.5), ValueError, "one row"),
        (lambda: lip.gloro_logits(Z2, torch.zeros(3, 4), LABELS.float(), 0.5), TypeError, "y must"),
        (lambda: lip.Recipe(epochs=0), ValueError, "epochs must be >= 1"),
        (lambda: lip.Recipe(lr=NAN), ValueError, "lr must be finite"),
        (lambda: lip.Recipe(batch=True), TypeError, "batch must be an integer"),
        (lambda: lip.train_model(torch.nn.Linear(2, 2), None), TypeError, "model must be"),
        (lambda: lip.train_model(lip.AOLNet(lip.AOLConfig()), "digits"), TypeError, "data must be"),
        (lambda: lip.head_aware_radius(Z2, torch.zeros(4, 3)), ValueError, "one row per logit"),
        (lambda: lip.generic_radius(Z2, 0.0), ValueError, "lipschitz must lie"),
        (lambda: lip.generic_radius(Z2, float("inf")), ValueError, "lipschitz must be finite"),
        (
            lambda: lip.certified_accuracy(LABELS, torch.zeros(3), LABELS, 0.1),
            ValueError,
            "pred must have shape",
        ),
        (
            lambda: lip.certified_accuracy(LABELS, torch.zeros(2), LABELS, -0.1),
            ValueError,
            "eps must lie",
        ),
        (lambda: lip.pgd_l2(lambda x: x, Z2, LABELS, -torch.ones(2)), ValueError, "eps must be"),
        (lambda: lip.pgd_l2("f", Z2, LABELS, torch.ones(2)), TypeError, "f must be a function"),
        (
            lambda: lip.pgd_l2(lambda x: x, Z2, LABELS, torch.ones(2), steps=0),
            ValueError,
            "steps must be >= 1",
        ),
        (
            lambda: lip.jacobian_spectral_norms(lambda x: x, torch.zeros(3)),
            ValueError,
            "x must have >= 2 axes",
        ),
        (lambda: lip.lipschitz_ratio_ascent(lambda x: x, Z2, lr=0.0), ValueError, "lr must lie"),
        (
            lambda: lip.train_and_certify(lip.AOLConfig(), lip.Recipe(), 0, 0, [0.5, NAN]),
            ValueError,
            "eps_grid contains NaN",
        ),
        (
            lambda: lip.train_and_certify(lip.AOLConfig(), lip.Recipe(), 0, 0, [-0.5]),
            ValueError,
            "eps_grid must be >= 0",
        ),
        (lambda: lip.trained_model(None), TypeError, "run must be a Run"),
    ],
)
def test_bad_calls_raise_a_clear_error(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
