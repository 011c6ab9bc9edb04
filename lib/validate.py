"""Argument checks shared by every module of `lib`: one clear error per bad value.

Each function returns the cleaned value or raises `TypeError` (wrong kind) or `ValueError`
(right kind, bad value) with a message that names the argument, shows what was passed and
says what to pass instead. `bool` is never accepted as a number, and NaN or inf never pass
silently.

    n = integer("n_seeds", n_seeds, minimum=1)
    lr = real("lr", lr, low=0, low_open=True)
    x = array("x", x, positive=True)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return `value` as an int in [minimum, maximum]; bools, floats and strings are refused."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        floor = "" if minimum is None else f" >= {minimum}"
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__} {_shown(value)}; "
            f"pass a whole number{floor}"
        )
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def real(
    name: str,
    value,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return `value` as a finite float in the interval [low, high] (ends open if asked)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {_shown(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {left}{low:g}, {high:g}{right}, got {value:g}")
    return value


def probability(name: str, value, *, open_ends: bool = False) -> float:
    """Return `value` as a float in [0, 1] ((0, 1) if `open_ends`)."""
    return real(name, value, low=0.0, high=1.0, low_open=open_ends, high_open=open_ends)


def choice(name: str, value, options: Iterable[str]) -> str:
    """Return `value` if it is one of `options` (strings), else a clear error listing them."""
    options = tuple(options)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {options}, got {_shown(value)}")
    return value


def boolean(name: str, value) -> bool:
    """Return `value` if it is a bool (Python or NumPy); 0, 1 and strings are refused."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {_shown(value)}")
    return bool(value)


def text(name: str, value, *, empty: bool = False) -> str:
    """Return `value` if it is a string (non-empty unless `empty`)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__} {_shown(value)}")
    if not empty and not value.strip():
        raise ValueError(f"{name} must not be empty")
    return value


def array(
    name: str,
    x,
    *,
    ndim: int | None = 1,
    positive: bool = False,
    nonnegative: bool = False,
    low: float | None = None,
    high: float | None = None,
    min_size: int = 1,
) -> np.ndarray:
    """Return x as a finite float array with `ndim` dimensions (None: any) and at least
    `min_size` entries; optionally every entry > 0, >= 0, or within [low, high]."""
    if isinstance(x, str | bytes):
        raise TypeError(f"{name} must be an array of numbers, got a string {_shown(x)}")
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of numbers, got {_shown(x)} ({err})") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.size < min_size:
        what = "is empty" if arr.size == 0 else f"has {arr.size} entries"
        raise ValueError(f"{name} {what}; pass at least {min_size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; pass finite values")
    if positive and np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0 everywhere, got min {arr.min():g}")
    if nonnegative and np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0 everywhere, got min {arr.min():g}")
    if low is not None and np.any(arr < low):
        raise ValueError(f"{name} must be >= {low:g} everywhere, got min {arr.min():g}")
    if high is not None and np.any(arr > high):
        raise ValueError(f"{name} must be <= {high:g} everywhere, got max {arr.max():g}")
    return arr


def integer_array(
    name: str, x, *, minimum: int | None = None, ndim: int | None = None
) -> np.ndarray:
    """Return x as an int64 array of whole numbers (each >= minimum if given); bools refused."""
    if isinstance(x, bool | np.bool_) or np.asarray(x).dtype == bool:
        raise TypeError(f"{name} must be whole numbers, not booleans, got {_shown(x)}")
    arr = array(name, x, ndim=ndim)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must be whole numbers, got {_shown(x)}")
    if minimum is not None and np.any(arr < minimum):
        raise ValueError(f"{name} must be >= {minimum} everywhere, got min {arr.min():g}")
    return arr.astype(np.int64)


def same_length(**arrays: np.ndarray) -> int:
    """Return the common length of the given arrays, or a clear error naming each length."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"arrays must have equal lengths, got {lengths}")
    return next(iter(lengths.values()))
