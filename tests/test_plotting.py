"""lib.plotting draws ours with a band and the paper dashed black, and rejects ragged input."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from lib.plotting import plot_ours, plot_paper, use_style  # noqa: E402


def test_ours_has_a_band_and_paper_is_dashed_black():
    use_style()
    fig, ax = plt.subplots()
    plot_ours(ax, [1, 2], [1, 2], [0.5, 1.5], [1.5, 2.5], label="ours")
    line = plot_paper(ax, [1, 2], [1, 2], label="paper")
    assert len(ax.collections) == 1
    assert line.get_linestyle() == "--" and line.get_color() == "black"
    plt.close(fig)


def test_ragged_or_half_band_is_an_error():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="same shape"):
        plot_ours(ax, [1, 2], [1, 2, 3], label="x")
    with pytest.raises(ValueError, match="both lo and hi"):
        plot_ours(ax, [1, 2], [1, 2], lo=[0, 1], label="x")
    plt.close(fig)
