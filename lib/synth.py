"""Seeded synthetic token streams whose optimal loss is known exactly.

A `MarkovChain` of order k draws each token from P(x_t | x_{t-k..t-1}); its entropy rate
H = sum_s pi_s H(P_s) (nats/token, pi the stationary distribution of the k-token state) is
the loss floor no model can beat, so chapters report loss *above* it. `language_family` builds
related "languages": one latent grammar over abstract concepts, mixed per language with a
private grammar (knob: `relatedness`), each written in its own surface vocabulary except a
shared fraction of tokens (knob: `token_overlap`).

Used by chapters 2, 6, 7, 11 and 12 (through `lib.train`). numpy only: no torch import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import connected_components
from scipy.special import entr

from lib import validate

MAX_STATES = 1 << 20  # V**order above this would not fit a dense next-token table


@dataclass(frozen=True, eq=False)
class MarkovChain:
    """Order-k source: next_probs[s, y] = P(x_t = y | state s), shape (V**k, V).

    The state of (x_{t-k}, ..., x_{t-1}) is the base-V number with x_{t-k} most significant;
    after emitting y it becomes (s * V + y) mod V**k. The chain must be irreducible.
    """

    next_probs: np.ndarray
    order: int = 1

    def __post_init__(self) -> None:
        P = np.asarray(self.next_probs, dtype=np.float64)
        if not isinstance(self.order, int) or self.order < 1:
            raise ValueError(f"order={self.order!r} must be an integer >= 1")
        if P.ndim != 2 or P.shape[0] != P.shape[1] ** self.order:
            raise ValueError(
                f"next_probs must have shape (V**order, V), got {P.shape} with order={self.order}"
            )
        if not np.all(np.isfinite(P)) or P.min() < 0:
            raise ValueError("next_probs must be finite and non-negative")
        if not np.allclose(P.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError("every row of next_probs must sum to 1")
        object.__setattr__(self, "next_probs", P)

    @property
    def vocab_size(self) -> int:
        """V, the number of token ids."""
        return self.next_probs.shape[1]

    @property
    def n_states(self) -> int:
        """V**order."""
        return self.next_probs.shape[0]

    def transition_matrix(self) -> sp.csr_matrix:
        """Sparse state-to-state matrix Q[s, (s V + y) mod V**k] = P(y | s), (V**k, V**k)."""
        n, V = self.next_probs.shape
        s, y = np.nonzero(self.next_probs)
        return sp.csr_matrix((self.next_probs[s, y], (s, (s * V + y) % n)), shape=(n, n))

    @cached_property
    def stationary(self) -> np.ndarray:
        """Stationary distribution pi (V**k,): solves pi Q = pi with sum(pi) = 1."""
        n = self.n_states
        n_comp, _ = connected_components(self.transition_matrix(), connection="strong")
        if n_comp != 1:
            raise ValueError(
                f"the chain is reducible ({n_comp} strongly connected components);"
                " its stationary distribution is not unique"
            )
        A = (self.transition_matrix().T - sp.identity(n)).tolil()
        A[n - 1, :] = np.ones(n)  # replace one (redundant) balance equation by sum(pi) = 1
        b = np.zeros(n)
        b[n - 1] = 1.0
        pi = spla.spsolve(A.tocsc(), b)
        return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()

    def entropy_rate(self) -> float:
        """Exact entropy rate H = sum_s pi_s * (-sum_y P(y|s) ln P(y|s)) in nats/token."""
        return float(self.stationary @ entr(self.next_probs).sum(axis=1))

    def sample(self, length: int, seed: int, n_streams: int = 1) -> np.ndarray:
        """n_streams independent stationary runs, int64 array (n_streams, length).

        The first k tokens are the digits of a state drawn from pi; the loop runs over time and
        is vectorised over streams, so many short streams are much faster than one long one.
        """
        _check_int("length", length, self.order)
        _check_int("n_streams", n_streams, 1)
        _check_int("seed", seed, 0)
        rng = np.random.default_rng(seed)
        V, k = self.vocab_size, self.order
        cum = np.cumsum(self.next_probs, axis=1)  # (V**k, V)
        state = rng.choice(self.n_states, size=n_streams, p=self.stationary)
        out = np.empty((n_streams, length), dtype=np.int64)
        for i in range(k):  # digits of the initial state, oldest first
            out[:, i] = (state // V ** (k - 1 - i)) % V
        u = rng.random((length, n_streams))
        rows = np.arange(n_streams)
        for t in range(k, length):
            y = (cum[state] < u[t][:, None]).sum(axis=1)  # inverse-CDF draw, (n_streams,)
            y = np.minimum(y, V - 1)  # guard against cum[-1] rounding just below 1
            out[rows, t] = y
            state = (state * V + y) % self.n_states
        return out

    def nll(self, tokens: np.ndarray) -> np.ndarray:
        """-ln P(x_t | x_{t-k..t-1}) in nats for t >= k: shape (..., L - k) of tokens (..., L)."""
        x = np.asarray(tokens)
        if x.ndim < 1 or x.shape[-1] <= self.order or not np.issubdtype(x.dtype, np.integer):
            raise ValueError(
                f"tokens must be integer ids with last axis > order={self.order}, "
                f"got shape {x.shape} dtype {x.dtype}"
            )
        if x.min() < 0 or x.max() >= self.vocab_size:
            raise ValueError(f"tokens must lie in [0, {self.vocab_size})")
        V, k, L = self.vocab_size, self.order, x.shape[-1]
        state = np.zeros(x.shape[:-1] + (L - k,), dtype=np.int64)
        for i in range(k):
            state = state * V + x[..., i : L - k + i]
        with np.errstate(divide="ignore"):
            return -np.log(self.next_probs[state, x[..., k:]])


def _check_int(name: str, value: object, low: int) -> None:
    validate.integer(name, value, minimum=low)


def _de_bruijn(V: int, k: int) -> np.ndarray:
    """A de Bruijn sequence B(V, k): every k-token word appears once, cyclically (V**k,).

    Concatenates the Lyndon words over V letters whose length divides k, in lexicographic
    order (Fredricksen & Maiorana 1978), generated iteratively (Duval's successor rule).
    """
    seq, w = [], [-1]
    while w:
        w[-1] += 1
        if k % len(w) == 0:
            seq.extend(w)
        m = len(w)
        while len(w) < k:  # extend periodically to length k
            w.append(w[len(w) - m])
        while w and w[-1] == V - 1:
            w.pop()
    return np.array(seq, dtype=np.int64)


def random_chain(
    vocab_size: int, order: int = 1, n_support: int = 4, alpha: float = 1.0, seed: int = 0
) -> MarkovChain:
    """A sparse random irreducible chain: each state has n_support next tokens, Dir(alpha).

    Irreducibility is built in: every state's support contains its successor along a randomly
    relabelled de Bruijn sequence, a cycle through all V**k states.
    """
    _check_int("vocab_size", vocab_size, 1)
    _check_int("order", order, 1)
    _check_int("seed", seed, 0)
    if vocab_size**order > MAX_STATES:
        raise ValueError(f"vocab_size**order = {vocab_size**order} exceeds {MAX_STATES}")
    if not isinstance(n_support, int) or not 1 <= n_support <= vocab_size:
        raise ValueError(f"n_support={n_support!r} must be an integer in [1, {vocab_size}]")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha={alpha!r} must be finite and > 0")
    rng = np.random.default_rng(seed)
    V, n = vocab_size, vocab_size**order
    cycle = rng.permutation(V)[_de_bruijn(V, order)]  # relabelling keeps it de Bruijn
    state = np.zeros(n, dtype=np.int64)
    for i in range(order):
        state = state * V + np.roll(cycle, -i)
    successor = np.empty(n, dtype=np.int64)
    successor[state] = np.roll(cycle, -order)
    keys = rng.random((n, V))
    keys[np.arange(n), successor] = -1.0  # always among the n_support smallest keys
    support = np.argsort(keys, axis=1)[:, :n_support]  # (n, n_support)
    P = np.zeros((n, V))
    np.put_along_axis(P, support, rng.dirichlet(np.full(n_support, alpha), size=n), axis=1)
    return MarkovChain(P, order)


def mix_chains(chains: Sequence[MarkovChain], weights: Sequence[float]) -> MarkovChain:
    """Convex mixture of next-token tables: P = sum_i w_i P_i (weights normalised to sum 1)."""
    if len(chains) == 0 or len(chains) != len(weights):
        raise ValueError(
            f"chains ({len(chains)}) and weights ({len(weights)}) must be "
            "non-empty and of equal length"
        )
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ValueError(f"weights={list(weights)} must be finite, >= 0, with a positive sum")
    shapes = {(c.order, c.vocab_size) for c in chains}
    if len(shapes) != 1:
        raise ValueError(f"chains must share order and vocab_size, got {sorted(shapes)}")
    P = sum(wi * c.next_probs for wi, c in zip(w / w.sum(), chains, strict=True))
    return MarkovChain(P, chains[0].order)


@dataclass(frozen=True, eq=False)
class Language:
    """A chain over abstract concepts written in surface tokens: token = token_map[concept].

    token_map (n_concepts,) is one-to-one, so the surface entropy rate equals the concept
    chain's; vocab_size is the size of the shared surface vocabulary of the whole family.
    """

    chain: MarkovChain
    token_map: np.ndarray
    vocab_size: int

    def __post_init__(self) -> None:
        m = np.asarray(self.token_map)
        if m.shape != (self.chain.vocab_size,) or not np.issubdtype(m.dtype, np.integer):
            raise ValueError(f"token_map must be integer ids of shape ({self.chain.vocab_size},)")
        if len(np.unique(m)) != len(m) or m.min() < 0 or m.max() >= self.vocab_size:
            raise ValueError(f"token_map must be distinct ids in [0, vocab_size={self.vocab_size})")
        object.__setattr__(self, "token_map", m.astype(np.int64))

    def entropy_rate(self) -> float:
        """Exact entropy rate in nats/token (that of the concept chain)."""
        return self.chain.entropy_rate()

    def sample(self, length: int, seed: int, n_streams: int = 1) -> np.ndarray:
        """Surface token streams, int64 (n_streams, length)."""
        return self.token_map[self.chain.sample(length, seed, n_streams)]

    def nll(self, tokens: np.ndarray) -> np.ndarray:
        """Exact -ln P per token (..., L - order); tokens outside this language are an error."""
        inverse = np.full(self.vocab_size, -1, dtype=np.int64)
        inverse[self.token_map] = np.arange(len(self.token_map))
        x = np.asarray(tokens)
        k = self.chain.order
        if x.ndim < 1 or x.shape[-1] <= k or not np.issubdtype(x.dtype, np.integer):
            raise ValueError(
                f"tokens must be integer ids with last axis > order={k}, "
                f"got shape {x.shape} dtype {x.dtype}"
            )
        if x.min() < 0 or x.max() >= self.vocab_size:
            raise ValueError(f"tokens must be integer ids in [0, {self.vocab_size})")
        concepts = inverse[x]
        if concepts.min() < 0:
            raise ValueError("tokens contain ids this language never writes")
        return self.chain.nll(concepts)


def language_family(
    n_languages: int,
    n_concepts: int,
    relatedness: float,
    token_overlap: float = 0.0,
    order: int = 1,
    n_support: int = 4,
    alpha: float = 1.0,
    seed: int = 0,
) -> list[Language]:
    """Related languages: P_l = relatedness * P_0 + (1 - relatedness) * F_l over concepts.

    P_0 (shared grammar) and every F_l (private grammar) are `random_chain`s. A random subset
    of round(token_overlap * n_concepts) concepts is written with the same token in every
    language; the rest get private ids. Surface vocabulary: n_shared + n_languages * (n_concepts
    - n_shared) ids, shared ones first. relatedness=1 and token_overlap=1 give one language.
    """
    _check_int("n_languages", n_languages, 1)
    _check_int("n_concepts", n_concepts, 1)
    _check_int("seed", seed, 0)
    for name, v in (("relatedness", relatedness), ("token_overlap", token_overlap)):
        if not (isinstance(v, (int, float)) and 0 <= v <= 1):
            raise ValueError(f"{name}={v!r} must be a number in [0, 1]")
    seeds = [int(s) for s in np.random.SeedSequence(seed).generate_state(n_languages + 2)]
    base = random_chain(n_concepts, order, n_support, alpha, seeds[0])
    n_shared = round(token_overlap * n_concepts)
    shared = np.random.default_rng(seeds[1]).permutation(n_concepts)[:n_shared]
    is_shared = np.zeros(n_concepts, dtype=bool)
    is_shared[shared] = True
    n_private = n_concepts - n_shared
    vocab = n_shared + n_languages * n_private
    languages = []
    for lang in range(n_languages):
        own = random_chain(n_concepts, order, n_support, alpha, seeds[2 + lang])
        token_map = np.empty(n_concepts, dtype=np.int64)
        token_map[np.sort(shared)] = np.arange(n_shared)
        token_map[~is_shared] = n_shared + lang * n_private + np.arange(n_private)
        chain = mix_chains([base, own], [relatedness, 1.0 - relatedness])
        languages.append(Language(chain, token_map, vocab))
    return languages


def split(tokens: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Split token streams (..., L) along time: the first (1 - f) L for training, the rest val."""
    x = np.asarray(tokens)
    if not (isinstance(val_fraction, (int, float)) and 0 < val_fraction < 1):
        raise ValueError(f"val_fraction={val_fraction!r} must be in (0, 1), e.g. 0.1")
    if x.ndim < 1:
        raise ValueError(f"tokens must have at least one axis, got shape {x.shape}")
    cut = round((1 - val_fraction) * x.shape[-1])
    if not 0 < cut < x.shape[-1]:
        raise ValueError(
            f"tokens of length {x.shape[-1]} are too short to split at val_fraction={val_fraction}"
        )
    return x[..., :cut], x[..., cut:]
