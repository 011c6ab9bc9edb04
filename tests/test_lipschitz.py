"""Unit tests of lib.lipschitz: known answers for the optimiser, the theorems, the layers, the
Cayley map and convolution, LipNeXt and the prior designs, ensembles of members, sizes and costs,
and a table of bad calls. Training and certification: tests/test_certify.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from lib import lipschitz as lip
from lib.certify import jacobian_spectral_norms

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


# --- The Cayley map and the Cayley convolution (Trockman & Kolter 2021) -----------------------


def test_cayley_map_is_orthogonal_and_agrees_with_expm_to_second_order():
    A = skew(6, 0.05, 4)
    Q = lip.cayley(A)
    assert lip.orthogonality_error(Q) < 1e-12
    # (I + A)^{-1}(I - A) = I - 2A + 2A^2 - 2A^3 ..., exp(-2A) = I - 2A + 2A^2 - 4/3 A^3 ...
    err = float(torch.linalg.matrix_norm(Q - torch.linalg.matrix_exp(-2 * A)))
    assert err < 0.05**3


def fft_cayley_conv(z: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """An independent frequency-domain version: irfft2(Cayley(A(w)) rfft2(z)) per member."""
    n, k = z.shape[-1], K.shape[-1]
    Kp = torch.roll(torch.nn.functional.pad(K, (0, n - k, 0, n - k)), (-(k // 2),) * 2, (-2, -1))
    Kf = torch.fft.rfft2(Kp).permute(0, 3, 4, 1, 2)  # (E, n, m, C, C)
    eye = torch.eye(K.shape[1], dtype=Kf.dtype)
    A = Kf - Kf.conj().mT
    Q = torch.linalg.solve(eye + A, eye - A)
    zf = torch.fft.rfft2(z)  # (E, B, C, n, m)
    yf = torch.einsum("efgoi,ebifg->ebofg", Q, zf)
    return torch.fft.irfft2(yf, s=(n, n))


def test_cayley_convolution_is_an_isometry_and_a_circular_convolution():
    g = torch.Generator().manual_seed(5)
    z = torch.randn(2, 7, 6, 4, 4, generator=g, dtype=torch.float64)
    K = torch.randn(2, 6, 6, 3, 3, generator=g, dtype=torch.float64)
    y = lip.cayley_conv(z, K)
    torch.testing.assert_close(y, fft_cayley_conv(z, K))
    torch.testing.assert_close(y.flatten(2).norm(dim=2), z.flatten(2).norm(dim=2))
    shifted = lip.cayley_conv(torch.roll(z, (1, 2), (-2, -1)), K)  # commutes with shifts
    torch.testing.assert_close(shifted, torch.roll(y, (1, 2), (-2, -1)))
    torch.testing.assert_close(lip.cayley_conv(z, torch.zeros_like(K)), z)  # K = 0: identity
    assert (y - z).abs().max() > 0.1


# --- LipNeXt and the prior designs -----------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        lip.LipNeXtConfig(C=8, L=3, pool="l2"),
        lip.LipNeXtConfig(C=8, L=3, pool="flatten", orthogonal_map="cayley"),
        lip.ConvConfig("aol", C=6, L=3, pool="l2"),
        lip.ConvConfig("cayley", C=6, L=3, pool="flatten"),
    ],
)
def test_every_backbone_is_1_lipschitz_and_the_head_free(cfg):
    model = lip.build_model(cfg, (0, 1)).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in ("p", "b", "orth_free") or name.startswith("kernel"):
                p.normal_(generator=torch.Generator().manual_seed(len(name)))
    x = torch.rand(2, 20, 8, 8, dtype=torch.float64)
    assert model(x).shape == (2, 20, 10)
    assert model.backbone(x).shape == (2, 20, cfg.features)
    member = lip.Member(model, 1)
    torch.testing.assert_close(member(x[1]), model(x)[1])  # member 1 alone, same numbers
    assert jacobian_spectral_norms(member.backbone, x[1]).max() <= 1 + 1e-6  # float32 init


def test_aol_scale_of_a_1x1_kernel_is_theorem_1_with_or_without_a_member_axis():
    """A 1x1 convolution is the matrix P: d_i = (sum_j |P^T P|_ij)^{-1/2} and ||P D||_2 <= 1."""
    P = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    d = lip.aol_scale(P[:, :, None, None])
    torch.testing.assert_close(d, (P.T @ P).abs().sum(1).rsqrt())
    assert float(torch.linalg.matrix_norm(P * d, ord=2)) <= 1 + 1e-12
    K = torch.zeros(3, 3, 3, 3, dtype=torch.float64)
    K[:, :, 1, 1] = torch.eye(3)
    torch.testing.assert_close(lip.aol_scale(K), torch.ones(3, dtype=torch.float64))
    K2 = torch.randn(2, 5, 4, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(lip.aol_scale(K2), torch.stack([lip.aol_scale(k) for k in K2]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aol_rescaled_convolution_is_1_lipschitz_with_zero_padding(seed):
    K = torch.randn(6, 4, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    Kd = K * lip.aol_scale(K)[None, :, None, None]
    norm = operator_norm(lambda z: torch.nn.functional.conv2d(z, Kd, padding=1), (4, 4, 4))
    assert 0.5 < norm <= 1 + 1e-12  # bounded by 1, and not trivially small
    assert operator_norm(lambda z: torch.nn.functional.conv2d(z, K, padding=1), (4, 4, 4)) > 1


def test_parameter_counts_and_flops_have_their_closed_forms():
    C, L, T = 32, 6, 16
    for pool, F in (("l2", C), ("flatten", T * C)):
        model = lip.build_model(lip.LipNeXtConfig(C=C, L=L, pool=pool), (0, 1, 2))
        assert lip.members(model) == 3
        # orthogonal stack, positional encodings, biases, head
        assert lip.count_parameters(model) == (1 + 2 * L) * C**2 + L * T + L * C + 10 * F + 10
        # products per image: stem and two per block (2 T C^2 each), R M^T once per batch, head
        flops = 2 * T * C**2 * (1 + 2 * L) + 2 * C**3 * L / 64 + 2 * F * 10
        assert lip.flops_per_image(model) == pytest.approx(flops)
    conv = lip.build_model(lip.ConvConfig("cayley", C=16, L=L, pool="flatten"))
    assert lip.count_parameters(conv) == L * 9 * 16**2 + L * 16 + 10 * T * 16 + 10
    ratio = lip.count_parameters(conv) / lip.count_parameters(
        lip.build_model(lip.LipNeXtConfig(C=32, L=L, pool="flatten")))  # fmt: skip
    assert 0.85 < ratio < 0.9  # half the width matches the parameters


# --- Bad input: every public function names the argument and what to pass -------------------

NAN = float("nan")


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
            lambda: lip.OrthogonalAdam([torch.nn.Parameter(torch.eye(2))], betas=(0.9, 1.0)),
            ValueError,
            "betas[1]",
        ),
        (lambda: lip.spatial_shift(torch.zeros(1, 4, 4, 4), 0.5), ValueError, "alpha must lie"),
        (lambda: lip.spatial_shift(torch.zeros(1, 4, 4, 4), 1 / 8), ValueError, "shifts 0"),
        (lambda: lip.beta_abs(torch.zeros(4), 1.5), ValueError, "beta must lie"),
        (lambda: lip.minmax(torch.zeros(3)), ValueError, "even number"),
        (lambda: lip.minmax(torch.zeros(4), dim=2), ValueError, "dim must be <="),
        (lambda: lip.theorem2_basis(0), ValueError, "d must be >= 1"),
        (lambda: lip.kernel_gain(np.ones((6, 6)), 4), ValueError, "does not fit"),
        (lambda: lip.cayley(torch.zeros(2, 3)), ValueError, "A must be"),
        (lambda: lip.l2_pool(torch.zeros(4, 4, 4)), ValueError, "x must have >= 4 axes"),
        (lambda: lip.patchify(torch.zeros(1, 7, 7)), ValueError, "divisible by patch"),
        (
            lambda: lip.cayley_conv(torch.zeros(1, 2, 4, 4, 4), torch.zeros(1, 3, 3, 3, 3)),
            ValueError,
            "K must be (E, C, C, k, k)",
        ),
        (
            lambda: lip.cayley_conv(torch.zeros(1, 2, 4, 4, 4), torch.zeros(1, 4, 4, 5, 5)),
            ValueError,
            "k <= 4",
        ),
        (lambda: lip.aol_scale(torch.zeros(3, 3)), ValueError, "K must have >= 4 axes"),
        (lambda: lip.LipNeXtConfig(orthogonal_map="householder"), ValueError, "orthogonal_map"),
        (lambda: lip.LipNeXtConfig(pool="max"), ValueError, "pool must be one of"),
        (lambda: lip.LipNeXtConfig(C=2), ValueError, "C=2 must be >= patch^2"),
        (lambda: lip.LipNeXtConfig(C=4, alpha=1 / 8), ValueError, "shifts no channel"),
        (lambda: lip.LipNeXtConfig(L=True), TypeError, "L must be an integer"),
        (lambda: lip.ConvConfig(C=15), ValueError, "must be even"),
        (lambda: lip.ConvConfig(kernel=2), ValueError, "kernel=2 must be odd"),
        (lambda: lip.ConvConfig(kernel=5), ValueError, "must fit the 4-token grid"),
        (lambda: lip.ConvConfig(layer="bcop"), ValueError, "layer must be one of"),
        (lambda: lip.LipNeXt(lip.LipNeXtConfig(), seeds=(-1,)), ValueError, "seeds[0] must be"),
        (lambda: lip.LipNeXt(lip.LipNeXtConfig(), seeds=3), TypeError, "seeds must be a"),
        (lambda: lip.LipNeXt(lip.ConvConfig()), TypeError, "cfg must be a LipNeXtConfig"),
        (lambda: lip.build_model({"C": 32}), TypeError, "cfg must be a LipNeXtConfig"),
        (lambda: lip.count_parameters("model"), TypeError, "model must be a LipNeXt"),
        (lambda: lip.Member(lip.build_model(lip.ConvConfig()), 1), ValueError, "e must be <="),
        (lambda: lip.flops_per_image(lip.build_model(lip.ConvConfig()), 0), ValueError, "batch"),
    ],
)
def test_bad_calls_raise_a_clear_error(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
