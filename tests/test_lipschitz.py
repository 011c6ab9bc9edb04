"""Unit tests of lib.lipschitz: known answers for the optimiser, theorems, layers and audits."""

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


# --- Training, certification and the audits --------------------------------------------------


def test_training_runs_on_the_manifold_and_certifies():
    data = lip.load_digits_split(n_test=1597, seed=0)  # 200 training digits keep the test fast
    res = lip.train_lipnext(lip.LipNeXtConfig(C=8, L=2), data, epochs=6, batch=20, lr=3e-2)
    assert lip.orthogonality_error(res.model.orth.weight) < 1e-5
    assert 0 < res.error_before_retraction < 1e-2
    with torch.no_grad():
        j, r = lip.head_aware_radius(res.model(data.X_test), res.model.head.weight)
    assert lip.certified_accuracy(j, r, data.y_test, 0.0) > 0.3  # better than chance (0.1)


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
    mlp = torch.nn.Sequential(torch.nn.Linear(3, 3))
    with torch.no_grad():
        mlp[0].weight.copy_(A)
    assert lip.mlp_lipschitz_bound(mlp) == pytest.approx(2.0)


# --- Input validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: lip.fast_exp(torch.zeros(3, 4)),
        lambda: lip.fast_exp(torch.full((2, 2), float("nan"))),
        lambda: lip.polar(torch.zeros(3)),
        lambda: lip.spatial_shift(torch.zeros(1, 4, 4, 4), 0.5),
        lambda: lip.beta_abs(torch.zeros(4), 1.5),
        lambda: lip.minmax(torch.zeros(3)),
        lambda: lip.theorem2_basis(0),
        lambda: lip.kernel_gain(np.ones((6, 6)), 4),
        lambda: lip.patchify(torch.zeros(1, 7, 7)),
        lambda: lip.LipNeXtConfig(orthogonal_map="householder"),
        lambda: lip.LipNeXtConfig(C=2),
        lambda: lip.LipNeXtConfig(C=4, alpha=1 / 8),
        lambda: lip.OrthogonalAdam([torch.nn.Parameter(torch.eye(2))], lr=-1.0),
        lambda: lip.load_digits_split(n_test=5000),
        lambda: lip.generic_radius(torch.zeros(2, 3), 0.0),
        lambda: lip.certified_accuracy(torch.zeros(3), torch.zeros(3), torch.zeros(2), 0.1),
        lambda: lip.pgd_l2(
            lambda x: x, torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), -torch.ones(2)
        ),
        lambda: lip.gloro_logits(torch.zeros(2, 3), torch.zeros(3, 4), torch.zeros(2).long(), -1.0),
    ],
)
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()
