"""lib.fit recovers planted parameters and reproduces a published fit on published data."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lib import fit

EPOCH_CSV = (
    Path(__file__).resolve().parent.parent / "data" / "chinchilla-epoch" / "svg_extracted_data.csv"
)
# Besiroglu et al. 2024 (arXiv:2404.10102), grid fit of the Epoch digitisation of Hoffmann Fig. 4.
BESIROGLU2024 = {"E": 1.8172, "A": 477.8, "B": 2143.0, "alpha": 0.3473, "beta": 0.3672}


def test_power_law_recovers_planted_parameters():
    rng = np.random.default_rng(0)
    x = np.logspace(1, 5, 30)
    y = 3.0 * x**-0.4 * np.exp(rng.normal(0, 0.01, x.size))
    f = fit.fit_power_law(x, y, n_bootstrap=50, seed=1)
    assert f.alpha == pytest.approx(0.4, abs=0.01)
    assert f.A == pytest.approx(3.0, rel=0.05)
    lo, hi = f.ci["alpha"]
    assert lo < f.alpha < hi
    assert f.predict([10.0])[0] == pytest.approx(3.0 * 10**-0.4, rel=0.05)


def test_saturating_power_law_recovers_planted_parameters():
    rng = np.random.default_rng(1)
    x = np.logspace(0, 4, 25)
    y = (1.5 + 4.0 * x**-0.6) * np.exp(rng.normal(0, 0.002, x.size))
    f = fit.fit_saturating_power_law(x, y, n_bootstrap=30, seed=2)
    assert f.E == pytest.approx(1.5, abs=0.02)
    assert f.A == pytest.approx(4.0, rel=0.05)
    assert f.alpha == pytest.approx(0.6, abs=0.03)
    assert f.ci["E"][0] <= f.E <= f.ci["E"][1]


def test_chinchilla_recovers_planted_law():
    rng = np.random.default_rng(2)
    N = np.repeat(np.logspace(7, 10, 8), 6)
    D = np.tile(np.logspace(9, 12, 6), 8)
    L = (1.7 + 400 / N**0.34 + 410 / D**0.28) * np.exp(rng.normal(0, 1e-3, N.size))
    f = fit.fit_chinchilla(N, D, L)
    assert (f.E, f.alpha, f.beta) == pytest.approx((1.7, 0.34, 0.28), abs=0.03)
    assert f.predict([1e9], [1e11])[0] == pytest.approx(
        1.7 + 400 / 1e9**0.34 + 410 / 1e11**0.28, rel=1e-3
    )


def load_epoch() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Epoch data as Besiroglu et al. used it: D = C / 6N, the 5 highest losses dropped."""
    df = pd.read_csv(EPOCH_CSV)
    df = df.sort_values("loss").iloc[:-5]
    N, C = df["Model Size"].to_numpy(), df["Training FLOP"].to_numpy()
    return N, C / (6 * N), df["loss"].to_numpy()


@pytest.fixture(scope="module")
def epoch_fit() -> fit.ChinchillaFit:
    """The coarse-grid fit of the Epoch data, with 200 bootstrap resamples (about 10 s)."""
    N, D, L = load_epoch()
    assert len(L) == 240
    return fit.fit_chinchilla(N, D, L, grid="coarse", n_bootstrap=200, seed=0)


def test_chinchilla_reproduces_besiroglu2024_on_epoch_data(epoch_fit):
    f = epoch_fit
    # Three significant figures for E, alpha, beta; A and B are weakly identified (4 figures
    # printed, compared to 1%), and the summed Huber objective matches theirs, 0.0010183.
    assert round(f.E, 3) == pytest.approx(1.817, abs=1e-9)
    assert round(f.alpha, 3) == pytest.approx(0.347, abs=1e-9)
    assert round(f.beta, 3) == pytest.approx(0.367, abs=1e-9)
    assert f.A == pytest.approx(BESIROGLU2024["A"], rel=0.01)
    assert f.B == pytest.approx(BESIROGLU2024["B"], rel=0.01)
    assert f.objective == pytest.approx(0.0010183, rel=1e-3)


# Besiroglu et al. 2024, 95% bootstrap intervals of their fit on the same 240 points.
BESIROGLU2024_CI = {"E": (1.769, 1.871), "alpha": (0.317, 0.373), "beta": (0.331, 0.415)}


def test_chinchilla_bootstrap_matches_besiroglu2024_intervals(epoch_fit):
    for name, (lo, hi) in BESIROGLU2024_CI.items():
        # 200 resamples pin a 2.5% percentile to about +-0.005 here; allow 0.01
        assert epoch_fit.ci[name] == pytest.approx((lo, hi), abs=0.01), name


def test_logistic_recovers_planted_curve():
    x = np.linspace(-3, 3, 40)
    y = 0.25 + 0.7 * (1 / (1 + np.exp(-2.0 * (x - 0.5))))
    f = fit.fit_logistic(x, y)
    assert (f.lo, f.hi, f.k, f.x0) == pytest.approx((0.25, 0.95, 2.0, 0.5), abs=1e-4)
    g = fit.fit_logistic(x, y, lower=0.25, upper=0.95)
    assert (g.k, g.x0) == pytest.approx((2.0, 0.5), abs=1e-4)


def test_logit_linear_recovers_slope_and_clips():
    x = np.linspace(-2, 2, 21)
    p = 1 / (1 + np.exp(-(1.5 * x - 0.3)))
    f = fit.fit_logit_linear(x, p, eps=1e-6)
    assert (f.w, f.b, f.r2) == pytest.approx((1.5, -0.3, 1.0), abs=1e-6)
    g = fit.fit_logit_linear([0.0, 1.0, 2.0], [0.0, 0.5, 1.0], eps=0.01)
    assert g.b == pytest.approx(np.log(0.01 / 0.99), abs=1e-9)  # p = 0 clipped to eps
    assert g.predict([1.0])[0] == pytest.approx(0.5)


def test_metrics_known_answers():
    assert fit.r2_score([1, 2, 3], [1, 2, 3]) == 1.0
    assert fit.r2_score([1, 2, 3], [2, 2, 2]) == 0.0
    assert fit.relative_error([2.0, 4.0], [3.0, 3.0]) == pytest.approx([0.5, 0.25])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fit.fit_power_law([1, 2, 3], [1, -1, 2]), "y must be > 0"),
        (lambda: fit.fit_power_law([1, 2], [1, 2, 3]), "equal lengths"),
        (lambda: fit.fit_power_law([1, np.nan], [1, 2]), "NaN or inf"),
        (lambda: fit.fit_power_law([[1, 2]], [[1, 2]]), "1-D"),
        (lambda: fit.fit_power_law([1, 2], [1, 2], n_bootstrap=-1), "n_bootstrap"),
        (lambda: fit.fit_saturating_power_law([1, 2], [1, 2]), "at least 3"),
        (lambda: fit.fit_chinchilla([1] * 5, [1] * 5, [1] * 5, grid="fine"), "grid must be"),
        (lambda: fit.fit_chinchilla([1] * 5, [1] * 5, [1] * 5, huber_delta=0), "huber_delta"),
        (lambda: fit.fit_chinchilla([0] * 5, [1] * 5, [1] * 5), "N must be > 0"),
        (
            lambda: fit.fit_logistic([1, 2, 3, 4, 5], [1] * 5, lower=1, upper=0),
            "lower must be < upper",
        ),
        (lambda: fit.fit_logit_linear([1, 2], [0.5, 1.5]), "probabilities"),
        (lambda: fit.fit_logit_linear([1, 2], [0.2, 0.5], eps=0.7), "eps must lie in"),
        (lambda: fit.fit_logit_linear([1, 1], [0.2, 0.5]), "1 distinct value"),
        (lambda: fit.r2_score([1, 1, 1], [1, 2, 3]), "constant"),
        (lambda: fit.relative_error([0, 1], [1, 1]), "zeros"),
        (lambda: fit.PowerLawFit(1.0, 1.0).predict([0.0]), "x must be > 0"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
