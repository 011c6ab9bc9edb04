"""A generator-verifier pair trained here: a toy LM that adds, and a learned judge that checks it.

Chapter 8 tests Dorner et al.'s ROC theory of best-of-N and rejection sampling on a pair nobody
hand-built. A *problem* is a pair of 3-digit operands (a, b); its *answer* is a 4-digit sum
(0000-1998, leading zero written). Tokens: digits 0-9, '+' and '='; a prompt reads "abc+def=".

- The **generator** is `lib.lm`'s transformer trained briefly on random sums, so it still errs
  (mostly on carries). Sampled at temperature 1 with its output restricted to digits, it puts a
  probability on each of the 10^4 four-digit answers; `answer_distribution` enumerates them
  exactly in one batched forward pass, so drawing from it is drawing from the model.
- The **judge** is a second transformer with a smaller training budget, trained on correct sums
  of other problems; a logistic head on its per-digit log-probabilities of a candidate answer,
  fitted to the generator's answers to yet other problems, gives each answer a probability of
  being right. Like an LLM judge sampled at temperature 1, each call returns a yes/no verdict
  drawn with that probability, and a score averages `calls` verdicts (the paper averages five
  judge runs of a 0-10 score), so scores are discrete and tie often.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import expit

from lib import validate
from lib.lm import KVCache, LMConfig, TransformerLM
from lib.train import TrainConfig, train

OPERAND_DIGITS, ANSWER_DIGITS = 3, 4
PLUS, EQUALS = 10, 11  # token ids after the ten digits
PROMPT_LEN = 2 * OPERAND_DIGITS + 2  # "abc+def="
N_PROBLEMS = 10 ** (2 * OPERAND_DIGITS)  # problem id = 1000 a + b
N_ANSWERS = 10**ANSWER_DIGITS


@dataclass(frozen=True)
class AdderConfig:
    """Shape and optimiser of a toy adding LM (generator or judge): a 2-layer transformer."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 128
    batch_size: int = 64
    lr: float = 3e-3
    warmup_steps: int = 50

    def lm_config(self) -> LMConfig:
        """The LMConfig: 12 tokens, room for the prompt and the 4 answer digits."""
        return LMConfig(vocab_size=12, d_model=self.d_model, n_layers=self.n_layers,
                        n_heads=self.n_heads, n_kv_heads=self.n_heads, d_ff=self.d_ff,
                        max_seq_len=PROMPT_LEN + ANSWER_DIGITS)  # fmt: skip


def digits(values, width: int) -> np.ndarray:
    """Decimal digits of non-negative integers, most significant first: (n,) -> (n, width)."""
    values = np.asarray(values, dtype=np.int64)
    return (values[..., None] // 10 ** np.arange(width - 1, -1, -1)) % 10


def problems_from_ids(ids) -> np.ndarray:
    """Problem ids 1000 a + b -> operand pairs (n, 2)."""
    ids = validate.integer_array("ids", ids, minimum=0, ndim=1)
    if np.any(ids >= N_PROBLEMS):
        raise ValueError(f"ids must be < {N_PROBLEMS} (1000 a + b), got max {ids.max()}")
    return np.stack([ids // 10**OPERAND_DIGITS, ids % 10**OPERAND_DIGITS], axis=1)


def prompts(problems: np.ndarray) -> np.ndarray:
    """Prompt tokens "abc+def=" of operand pairs (n, 2): (n, 8) int64."""
    n = len(problems)
    return np.concatenate([digits(problems[:, 0], OPERAND_DIGITS), np.full((n, 1), PLUS),
                           digits(problems[:, 1], OPERAND_DIGITS), np.full((n, 1), EQUALS)],
                          axis=1)  # fmt: skip


@dataclass(frozen=True)
class TrainedAdder:
    """A trained adding LM (eval mode), the steps it took and its sampled validation accuracy."""

    model: TransformerLM
    steps: int
    accuracy: float


class _Reached(Exception):
    """Raised by the training callback to stop a run once it reaches its target accuracy."""

    def __init__(self, result: TrainedAdder):
        super().__init__(f"reached accuracy {result.accuracy:.3f} after {result.steps} steps")
        self.result = result


def sampled_accuracy(model: TransformerLM, problems: np.ndarray, seed: int) -> float:
    """Share of problems (n, 2) whose one sampled answer (temperature 1) is the true sum."""
    return float(np.mean(sample_answers(model, problems, seed) == problems.sum(axis=1)))


def train_adder(seed: int, target: float, validation: np.ndarray, max_steps: int, exclude=(),
                config: AdderConfig = AdderConfig(), every: int = 10) -> TrainedAdder:  # fmt: skip
    """Train a toy LM on random sums a + b (never a problem id in `exclude`) until its sampled
    accuracy on the `validation` problems (n, 2), checked every `every` steps, reaches
    `target`, or for `max_steps` (cosine schedule over max_steps).

    The loss counts the 4 answer digits only (prompt targets are -100, which cross-entropy
    ignores). Stopping at a target accuracy, not a step count, makes the model's skill, not
    its training time, the thing held fixed across seeds.
    """
    seed = validate.integer("seed", seed, minimum=0)
    target = validate.probability("target", target)
    max_steps, every = (validate.integer(n, v, minimum=1)
                        for n, v in (("max_steps", max_steps), ("every", every)))  # fmt: skip
    excluded = torch.as_tensor(np.unique(np.asarray(exclude, dtype=np.int64)))

    def batch(step: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.randint(N_PROBLEMS, (config.batch_size,), generator=gen)
        while bool(torch.isin(ids, excluded).any()):  # redraw held-out problems
            hit = torch.isin(ids, excluded)
            ids[hit] = torch.randint(N_PROBLEMS, (int(hit.sum()),), generator=gen)
        problems = problems_from_ids(ids.numpy())
        answer = digits(problems.sum(axis=1), ANSWER_DIGITS)
        seq = torch.as_tensor(np.concatenate([prompts(problems), answer], axis=1))
        target_tokens = seq[:, 1:].clone()
        target_tokens[:, : PROMPT_LEN - 1] = -100
        return seq[:, :-1], target_tokens

    def check(done: int, model: TransformerLM) -> None:
        if done % every == 0 or done == max_steps:
            model.eval()
            accuracy = sampled_accuracy(model, validation, seed)
            if accuracy >= target or done == max_steps:
                raise _Reached(TrainedAdder(model, done, accuracy))

    cfg = TrainConfig(steps=max_steps, batch_size=config.batch_size, seq_len=PROMPT_LEN + 3,
                      lr=config.lr, warmup_steps=min(config.warmup_steps, max_steps),
                      weight_decay=0.0,
                      seed=seed % 2**62)  # fmt: skip
    try:
        train(config.lm_config(), cfg, None, batch_fn=batch, callback=check)
    except _Reached as stop:
        return stop.result
    raise AssertionError("unreachable: the callback stops the run at max_steps")


@torch.no_grad()
def answer_distribution(model: TransformerLM, problem) -> np.ndarray:
    """Exact probability of each 4-digit answer 0..9999 to one problem (a, b): (10^4,).

    Sampling at temperature 1 restricted to digit tokens; one forward pass over the 1000
    three-digit prefixes gives every conditional p(d_k | d_<k), whose products are exact.
    """
    problem = np.asarray(problem, dtype=np.int64).reshape(1, 2)
    prefixes = digits(np.arange(10 ** (ANSWER_DIGITS - 1)), ANSWER_DIGITS - 1)  # (1000, 3)
    seq = np.concatenate([np.repeat(prompts(problem), len(prefixes), 0), prefixes], axis=1)
    logits = model(torch.as_tensor(seq))[0][:, PROMPT_LEN - 1 :, :10]  # (1000, 4, 10)
    logp = torch.log_softmax(logits, dim=-1)
    chosen = torch.as_tensor(prefixes)[..., None]  # the prefix's own digits
    prefix_logp = logp[:, :-1].gather(2, chosen)[..., 0].sum(dim=1)  # (1000,)
    joint = prefix_logp[:, None] + logp[:, -1]  # (1000 prefixes, 10 last digits)
    return joint.reshape(-1).double().exp().numpy()


@torch.no_grad()
def sample_answers(model: TransformerLM, problems: np.ndarray, seed: int) -> np.ndarray:
    """One answer per problem (n, 2) by ancestral sampling at temperature 1 over digits: (n,)."""
    gen = torch.Generator().manual_seed(validate.integer("seed", seed, minimum=0) % 2**62)
    x = torch.as_tensor(prompts(problems))
    cache = KVCache(model.cfg, len(x), PROMPT_LEN + ANSWER_DIGITS)
    answer = torch.zeros(len(x), dtype=torch.int64)
    for _ in range(ANSWER_DIGITS):
        probs = torch.softmax(model(x, cache)[0][:, -1, :10], dim=-1)
        x = torch.multinomial(probs, 1, generator=gen)  # (n, 1)
        answer = 10 * answer + x[:, 0]
    return answer.numpy()


@torch.no_grad()
def digit_logprobs(model: TransformerLM, problems: np.ndarray, answers) -> np.ndarray:
    """log p(d_k | prompt, d_<k) of each answer digit under `model`: (n, 4)."""
    answer = digits(answers, ANSWER_DIGITS)
    seq = torch.as_tensor(np.concatenate([prompts(problems), answer], axis=1))
    logp = torch.log_softmax(model(seq[:, :-1])[0][:, PROMPT_LEN - 1 :, :10], dim=-1)
    return logp.gather(2, torch.as_tensor(answer)[..., None])[..., 0].numpy()


@dataclass(frozen=True)
class Judge:
    """A learned judge: p(right) = sigmoid(coef . log p_lm(answer digits) + intercept).

    `scores` draws `calls` yes/no verdicts per answer and averages them: Binomial(calls, p)/calls.
    """

    lm: TransformerLM
    coef: np.ndarray
    intercept: float
    calls: int

    def prob(self, problems: np.ndarray, answers) -> np.ndarray:
        """Probability that one call says "right" for each (problem, answer): (n,)."""
        z = digit_logprobs(self.lm, problems, answers) @ self.coef + self.intercept
        return expit(z)

    def scores(self, p, rng: np.random.Generator) -> np.ndarray:
        """One score per answer with verdict probability p: the share of `calls` yes verdicts."""
        return rng.binomial(self.calls, np.asarray(p)) / self.calls


def fit_judge(lm: TransformerLM, problems: np.ndarray, answers, correct, calls: int) -> Judge:
    """Fit the judge's logistic head to labelled answers (the generator's, to other problems)."""
    from sklearn.linear_model import LogisticRegression

    correct = np.asarray(correct)
    if correct.dtype != bool or correct.shape != (len(problems),):
        raise TypeError(f"correct must be a boolean array of shape ({len(problems)},)")
    if correct.all() or not correct.any():
        raise ValueError("the judge's head needs both right and wrong answers to learn from")
    features = digit_logprobs(lm, problems, answers)
    head = LogisticRegression(max_iter=1000).fit(features, correct)
    return Judge(lm, head.coef_[0].copy(), float(head.intercept_[0]),
                 validate.integer("calls", calls, minimum=1))  # fmt: skip
