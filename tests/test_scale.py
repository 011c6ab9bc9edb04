"""lib.scale reads REPRO_SCALE strictly and picks sizes by it."""

import pytest

from lib.scale import by_scale, scale


def test_default_is_quick(monkeypatch):
    monkeypatch.delenv("REPRO_SCALE", raising=False)
    assert scale() == "quick"
    assert by_scale(1, 10) == 1


def test_full_picks_the_full_value(monkeypatch):
    monkeypatch.setenv("REPRO_SCALE", "full")
    assert by_scale(1, 10) == 10


def test_unknown_scale_is_an_error(monkeypatch):
    monkeypatch.setenv("REPRO_SCALE", "huge")
    with pytest.raises(
        ValueError, match="REPRO_SCALE='huge' is not one of quick, full; pass quick or full"
    ):
        scale()
