"""Unit tests of lib.certify: ensembles train as independent members, bfloat16 training,
certificates (known answers, the head-aware rule against the generic one, the measured Lipschitz
bound), the audits on maps with known constants, and a table of bad calls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib import certify as cert
from lib import lipschitz as lip

torch.set_num_threads(1)
SMALL = cert.load_digits_split(n_test=1597, seed=0)  # 200 training digits keep the tests fast


def small(seed: int) -> cert.Digits:
    return cert.load_digits_split(n_test=1597, seed=seed)


# --- Training ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg", [lip.LipNeXtConfig(C=8, L=2, pool="flatten"), lip.ConvConfig("aol", C=6, L=2),
            lip.ConvConfig("cayley", C=6, L=2, pool="l2")],
)  # fmt: skip
def test_a_member_gets_the_gradient_it_would_get_alone(cfg):
    """Each member's loss sees only its own weights, and Adam acts entry by entry, so the
    members of an ensemble train independently (up to rounding: Adam magnifies the rounding
    of near-zero gradients, so whole trajectories are not compared)."""
    x = torch.rand(2, 16, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 10, (2, 16))
    pair, alone = lip.build_model(cfg, (3, 4)).double(), lip.build_model(cfg, (4,)).double()
    for model, xs, ys in ((pair, x, y), (alone, x[1:], y[1:])):
        z = cert.gloro_logits(model(xs), model.head.weight, ys, 0.5)
        torch.nn.functional.cross_entropy(z.flatten(0, 1), ys.flatten(), reduction="sum").backward()
    for (name, p), q in zip(pair.named_parameters(), alone.parameters(), strict=True):
        torch.testing.assert_close(p.grad[1:], q.grad, msg=name)


@pytest.mark.parametrize("precision", ["float32", "bfloat16-autocast"])
def test_training_stays_on_the_manifold_and_certifies(precision):
    recipe = cert.Recipe(epochs=6, batch=20, lr=3e-2, precision=precision)
    model = lip.build_model(lip.LipNeXtConfig(C=8, L=2), (0, 1))
    res = cert.train_model(model, [SMALL, small(1)], recipe, (0, 1))
    assert lip.orthogonality_error(model.orth) < 1e-5
    assert 0 < res.error_before_retraction < 1e-2
    assert float(cert.lipschitz_bound(model).max()) < 1 + 1e-5
    X, y = (
        torch.stack([SMALL.X_test, small(1).X_test]),
        torch.stack([SMALL.y_test, small(1).y_test]),
    )
    pred, radius, cra = cert.certify(model, X, y, np.array([0.0, 0.25]))
    assert pred.shape == radius.shape == (2, 1597) and (cra[:, 0] > 0.3).all()  # chance: 0.1


def test_bfloat16_weights_without_retraction_leave_the_manifold():
    recipe = cert.Recipe(epochs=3, batch=20, lr=3e-2, precision="bfloat16-pure", retract=False)
    model = lip.build_model(lip.LipNeXtConfig(C=8, L=2), (0,))
    res = cert.train_model(model, [SMALL], recipe, (0,))
    assert res.model.orth.dtype == torch.bfloat16 and math.isnan(res.error_before_retraction)
    assert float(cert.lipschitz_bound(model)[0]) > 1.01


def test_lipschitz_bound_is_the_product_of_the_applied_matrices_norms():
    model = lip.build_model(lip.LipNeXtConfig(C=8, L=2), (0, 1)).double()
    with torch.no_grad():
        model.orth.copy_(lip.polar(model.orth))  # orthogonal in float64, not just float32
    torch.testing.assert_close(cert.lipschitz_bound(model), torch.ones(2, dtype=torch.float64))
    with torch.no_grad():
        model.orth[1, 0] *= 1.5  # member 1's stem
        model.orth[1, 1] *= 2.0  # member 1's R_1, applied twice (R and R M^T)
    torch.testing.assert_close(
        cert.lipschitz_bound(model), torch.tensor([1.0, 6.0], dtype=torch.float64)
    )
    conv = lip.build_model(lip.ConvConfig(), (0, 1, 2))
    assert (cert.lipschitz_bound(conv) == 1).all()


def test_train_and_certify_is_deterministic_and_rebuilds_the_ensemble():
    grid = np.array([0.0, 0.5])
    cfg, recipe = lip.ConvConfig("cayley", C=6, L=2), cert.Recipe(epochs=1, lr=3e-3)
    a, b = (cert.train_and_certify(cfg, recipe, (3, 5), (4, 6), grid) for _ in range(2))
    np.testing.assert_array_equal(a.cra, b.cra)
    assert a.cra.shape == a.train_cra.shape == (2, 2) and (a.cra[:, 0] >= a.cra[:, 1]).all()
    assert math.isnan(a.error_before_retraction) and (a.lipschitz == 1).all()
    data = cert.load_digits_split(seed=5)
    member = lip.Member(cert.trained_model(a), 1)
    with torch.no_grad():
        pred, radius = cert.head_aware_radius(member(data.X_test.double()), member.head_weight)
    torch.testing.assert_close(radius, a.radius[1])
    assert (pred == a.pred[1]).all()


def test_gloro_logits_add_the_head_distances_with_or_without_members():
    W = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    z, y = torch.zeros(2, 3), torch.tensor([0, 2])
    expected = torch.tensor([[0.0, 5.0, 1.0], [1.0, math.sqrt(18), 0.0]]) * 0.5
    torch.testing.assert_close(cert.gloro_logits(z, W, y, 0.5), expected)
    torch.testing.assert_close(cert.gloro_logits(z[None], W[None], y[None], 0.5)[0], expected)


# --- Certification and the audits ------------------------------------------------------------


def test_head_aware_radius_known_answer_and_dominates_generic():
    W = torch.eye(3, dtype=torch.float64)
    z = torch.tensor([[3.0, 1.0, 0.0], [0.0, 0.5, 2.5]], dtype=torch.float64)
    j, r = cert.head_aware_radius(z, W)
    torch.testing.assert_close(j, torch.tensor([0, 2]))
    torch.testing.assert_close(r, torch.tensor([2.0, 2.0], dtype=torch.float64) / math.sqrt(2))
    g = torch.Generator().manual_seed(0)
    W, z = torch.randn(10, 16, generator=g), torch.randn(300, 10, generator=g)
    _, r = cert.head_aware_radius(z, W)
    _, r_gen = cert.generic_radius(z, float(torch.linalg.matrix_norm(W, 2)))
    assert (r >= r_gen - 1e-6).all() and (r > r_gen * 1.2).any()


def test_pgd_matches_the_exact_radius_of_a_linear_classifier():
    g = torch.Generator().manual_seed(0)  # two classes: the margin loss points at the boundary
    W, c = torch.randn(2, 6, generator=g, dtype=torch.float64), torch.randn(2, dtype=torch.float64)

    def f(x):
        return x @ W.T + c

    x = torch.randn(40, 6, generator=g, dtype=torch.float64)
    j, r = cert.head_aware_radius(f(x), W)  # exact for a linear model: distance to the boundary
    assert not cert.pgd_l2(f, x, j, 0.99 * r, steps=50, restarts=2).any()
    assert cert.pgd_l2(f, x, j, 1.01 * r, steps=50, restarts=2).all()


def test_lipschitz_audits_can_fail():
    A = torch.diag(torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64))

    def f(x):
        return x @ A.T

    x = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(
        cert.jacobian_spectral_norms(f, x), torch.full((5,), 2.0, dtype=torch.float64)
    )
    assert 1.9 < cert.lipschitz_ratio_ascent(f, x, steps=50) <= 2 + 1e-9


# --- Bad input: every public function names the argument and what to pass -------------------

Z2 = torch.zeros(2, 3)
LABELS = torch.zeros(2, dtype=torch.long)
NAN = float("nan")
AOL = lip.ConvConfig()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: cert.load_digits_split(n_test=5000), ValueError, "n_test must be <="),
        (lambda: cert.load_digits_split(seed=1.5), TypeError, "seed must be an integer"),
        (lambda: cert.gloro_logits(Z2, torch.zeros(3, 4), LABELS, -1.0), ValueError, "eps must"),
        (lambda: cert.gloro_logits(Z2, torch.zeros(2, 4), LABELS, 0.5), ValueError, "W must be"),
        (
            lambda: cert.gloro_logits(Z2, torch.zeros(3, 4), LABELS.float(), 0.5),
            TypeError,
            "y must",
        ),
        (lambda: cert.Recipe(epochs=0), ValueError, "epochs must be >= 1"),
        (lambda: cert.Recipe(lr=NAN), ValueError, "lr must be finite"),
        (lambda: cert.Recipe(batch=True), TypeError, "batch must be an integer"),
        (lambda: cert.Recipe(precision="float16"), ValueError, "precision must be one of"),
        (lambda: cert.Recipe(retract="yes"), TypeError, "retract must be"),
        (
            lambda: cert.train_model(lip.build_model(AOL), SMALL),
            TypeError,
            "data must be a sequence of 1 Digits",
        ),
        (
            lambda: cert.train_model(lip.build_model(AOL), [SMALL], seeds=(0, 1)),
            ValueError,
            "one seed per member (1)",
        ),
        (
            lambda: cert.train_model(
                lip.build_model(AOL, (0, 1)), [SMALL, cert.load_digits_split()]
            ),
            ValueError,
            "same number of training digits",
        ),
        (lambda: cert.train_model(torch.nn.Linear(2, 2), [SMALL]), TypeError, "model must be"),
        (lambda: cert.head_aware_radius(Z2, torch.zeros(4, 3)), ValueError, "one row per logit"),
        (lambda: cert.generic_radius(Z2, 0.0), ValueError, "lipschitz must lie"),
        (
            lambda: cert.certified_accuracy(LABELS, torch.zeros(3), LABELS, 0.1),
            ValueError,
            "pred must have shape",
        ),
        (
            lambda: cert.certified_accuracy(LABELS, torch.zeros(2), LABELS, -0.1),
            ValueError,
            "eps must lie",
        ),
        (lambda: cert.pgd_l2(lambda x: x, Z2, LABELS, -torch.ones(2)), ValueError, "eps must be"),
        (lambda: cert.pgd_l2("f", Z2, LABELS, torch.ones(2)), TypeError, "f must be a function"),
        (
            lambda: cert.jacobian_spectral_norms(lambda x: x, torch.zeros(3)),
            ValueError,
            "x must have >= 2 axes",
        ),
        (lambda: cert.lipschitz_ratio_ascent(lambda x: x, Z2, lr=0.0), ValueError, "lr must lie"),
        (
            lambda: cert.train_and_certify(AOL, cert.Recipe(), (0,), (0,), [0.5, NAN]),
            ValueError,
            "eps_grid contains NaN",
        ),
        (
            lambda: cert.train_and_certify(AOL, cert.Recipe(), (0, 1), (0,), [0.5]),
            ValueError,
            "equal length",
        ),
        (lambda: cert.trained_model(None), TypeError, "runs must be a Runs"),
    ],
)
def test_bad_calls_raise_a_clear_error(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
