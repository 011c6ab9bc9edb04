"""Reading summary files (lib.claims.summary): a corrupt, adversarial or misplaced file is a
SummaryError naming the file (and the other file it collides with), never a hang, a bare error
or a wrong row on the scorecard (issue 60)."""

import json
import os
import re
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lib.claims import SummaryError, load_summaries, load_summary, read_summary
from lib.claims.summary import MAX_BYTES

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "05_sgd_momentum"
FILE = f"{CHAPTER}.json"
TEXT = (ROOT / "book" / "results" / FILE).read_text(encoding="utf-8")  # a real, valid summary
FIRST_FLOAT = re.compile(r"(?<=: )-?[0-9]+\.[0-9]+")


def replaced(old: str, new: str) -> str:
    """The real summary's text with the first `old` replaced by `new`."""
    assert old in TEXT
    return TEXT.replace(old, new, 1)


def with_field(key: str, value) -> str:
    """The real summary with one top-level field set (written as JSON)."""
    summary = json.loads(TEXT)
    summary[key] = value
    return json.dumps(summary)


def nested(depth: int) -> str:
    """The real summary with `depth` lists nested in its criteria history."""
    return replaced(
        '"criteria_history": [', '"criteria_history": [' + "[" * depth + "]" * depth + ","
    )


def deep_top(folder: Path) -> None:
    (folder / FILE).write_bytes(b"[" * 100_000 + b"]" * 100_000)


def content(data: str | bytes) -> Callable[[Path], None]:
    """A case that writes `data` as the chapter's summary file."""

    def make(folder: Path) -> None:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        (folder / FILE).write_bytes(raw)

    return make


def fifo(folder: Path) -> None:
    os.mkfifo(folder / FILE)


def a_folder(folder: Path) -> None:
    (folder / FILE).mkdir()


def dangling(folder: Path) -> None:
    (folder / FILE).symlink_to("gone.json")


def loop(folder: Path) -> None:
    (folder / FILE).symlink_to(folder / "other.json")
    (folder / "other.json").symlink_to(folder / FILE)


def device(folder: Path) -> None:
    (folder / FILE).symlink_to("/dev/zero")  # read whole, it never ends


def a_socket(folder: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / FILE))
    server.close()


def beside(name: str, text: str = TEXT) -> Callable[[Path], None]:
    """A case with the real summary and another file `name` beside it."""

    def make(folder: Path) -> None:
        (folder / FILE).write_text(TEXT, encoding="utf-8")
        (folder / name).write_text(text, encoding="utf-8")

    return make


def huge(folder: Path) -> None:
    (folder / FILE).write_text(TEXT + " " * MAX_BYTES, encoding="utf-8")


@dataclass(frozen=True)
class Case:
    """A bad results folder: how to make it, what the error must say, which files it names."""

    name: str
    make: Callable[[Path], None]
    problem: str  # a regex the message must match
    names: tuple[str, ...] = (FILE,)  # files the message must name (full paths)
    alone: bool = True  # the bad file is the chapter's own: read_summary refuses it too


CASES = [
    Case("empty", content(b""), "empty"),
    Case("blank", content(b"  \n\t\n"), "empty"),
    Case("truncated", content(TEXT[: len(TEXT) // 2]), "not valid JSON"),
    Case("latin-1", content(b'{"title": "caf\xe9"}'), "not UTF-8"),
    Case("utf-16", content(TEXT.encode("utf-16")), "not UTF-8"),
    Case("utf-8 bom", content(b"\xef\xbb\xbf" + TEXT.encode()), "not valid JSON"),
    Case("a list", content(b"[]"), "expected a JSON object"),
    Case("null", content(b"null"), "expected a JSON object"),
    Case("a number", content(b"5"), "expected a JSON object"),
    Case("a string", content(b'"summary"'), "expected a JSON object"),
    Case("NaN seed", content(replaced('"base_seed": 0', '"base_seed": NaN')), "holds NaN"),
    Case("NaN number", content(FIRST_FLOAT.sub("NaN", TEXT, 1)), "holds NaN"),
    Case("Infinity", content(FIRST_FLOAT.sub("Infinity", TEXT, 1)), "holds Infinity"),
    Case("-Infinity", content(FIRST_FLOAT.sub("-Infinity", TEXT, 1)), "holds -Infinity"),
    Case("1e999", content(FIRST_FLOAT.sub("1e999", TEXT, 1)), "overflows to inf"),
    Case("-1e999", content(FIRST_FLOAT.sub("-1e999", TEXT, 1)), "overflows to -inf"),
    Case(
        "5000 digits",
        content(replaced('"base_seed": 0', '"base_seed": ' + "7" * 5000)),
        "integer of 5000 characters",
    ),  # fmt: skip
    Case(
        "25 digits",
        content(replaced('"base_seed": 0', '"base_seed": ' + "1" * 25)),
        "integer of 25 characters",
    ),  # fmt: skip
    Case("100,000 deep", deep_top, "nested over 16 levels"),
    Case("900 deep field", content(nested(900)), "nested over 16 levels"),
    Case("100,000 deep field", content(nested(100_000)), "nested over 16 levels"),
    Case("17 deep field", content(nested(17)), "nested over 16 levels"),
    Case(
        "60,000 values",
        content(replaced('"criteria_history": [', '"criteria_history": [' + "0," * 60_000)),
        "over 50000 values",
    ),  # fmt: skip
    Case("over the size limit", huge, f"over {MAX_BYTES} bytes"),
    Case(
        "duplicate verdict",
        content(replaced("{", '{\n  "verdict": "Reproduced",')),
        "gives the key 'verdict' twice",
    ),  # fmt: skip
    Case(
        "duplicate chapter",
        content(replaced("{", '{\n  "chapter": "06_loss_curve_collapse",')),
        "gives the key 'chapter' twice",
    ),  # fmt: skip
    Case(
        "duplicate claim field",
        content(replaced('"central": true,', '"central": true, "central": false,')),
        "gives the key 'central' twice",
    ),  # fmt: skip
    Case("lone surrogate", content(replaced('"Momentum', '"\\ud800Momentum')), "lone surrogate"),
    Case("NUL byte", content(TEXT.replace("{", "{\0", 1)), "not valid JSON"),
    Case(
        "raw tab in a string", content(replaced("Momentum is", "Momentum\tis")), "not valid JSON"
    ),  # fmt: skip
    Case("trailing garbage", content(TEXT + "x"), "not valid JSON.*Extra data"),
    Case("two summaries", content(TEXT + TEXT), "not valid JSON.*Extra data"),
    Case("a number as a string", content(with_field("base_seed", "0")), "must be int"),
    Case(
        "another chapter",
        content(with_field("chapter", "06_loss_curve_collapse")),
        "field 'chapter' is '06_loss_curve_collapse', but the file is named for 05_sgd_momentum",
        (FILE, "06_loss_curve_collapse.json"),
    ),  # fmt: skip
    Case(
        "a stale chapter name",
        content(with_field("chapter", "05_sgd_momentum_old")),
        "would take its row",
        (FILE, "05_sgd_momentum_old.json"),
    ),  # fmt: skip
    Case(
        "no chapter name", content(with_field("chapter", "../../etc/passwd")), "not a chapter name"
    ),  # fmt: skip
    Case("a 10 kB chapter", content(with_field("chapter", "x" * 10_000)), "not a chapter name"),
    Case("another scale", content(with_field("scale", "full")), "do not match its name"),
    Case("another seed", content(with_field("base_seed", 3)), "do not match its name"),
    Case("a FIFO", fifo, r"is a named pipe \(FIFO\), not a regular file"),
    Case("a folder", a_folder, "is a folder, not a regular file"),
    Case("a dangling symlink", dangling, "symbolic link to .*gone.json.*does not resolve"),
    Case("a symlink loop", loop, "a symbolic link loop"),
    Case("/dev/zero", device, "is a character device"),
    Case("a socket", a_socket, "cannot be opened|is a socket"),
    Case(
        "a stale copy beside",
        beside("05_sgd_momentum_old.json"),
        "two chapters numbered 05",
        (FILE, "05_sgd_momentum_old.json"),
        False,
    ),  # fmt: skip
    Case(
        "a renamed chapter beside",
        beside("05_momentum.json", with_field("chapter", "05_momentum")),
        "two chapters numbered 05",
        (FILE, "05_momentum.json"),
        False,
    ),  # fmt: skip
    Case(
        "a backup name",
        beside("05_sgd_momentum.old.json"),
        "is not named as a summary",
        ("05_sgd_momentum.old.json",),
        False,
    ),  # fmt: skip
    Case(
        "upper case",
        beside("05_SGD_momentum.json"),
        "is not named as a summary",
        ("05_SGD_momentum.json",),
        False,
    ),  # fmt: skip
    Case(
        "seed 00",
        beside("05_sgd_momentum.seed00.json"),
        "is not named as a summary",
        ("05_sgd_momentum.seed00.json",),
        False,
    ),  # fmt: skip
]


def loaders(case: Case) -> list[Callable[[Path], object]]:
    """Every way a page or chapter reads this summary."""
    calls = [load_summaries, lambda folder: load_summary(CHAPTER, "quick", folder)]
    return calls + ([lambda folder: read_summary(folder / FILE)] if case.alone else [])


@pytest.mark.timeout(60)  # a FIFO or /dev/zero read whole would hang: fail instead
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_corrupt_or_adversarial_summary_is_a_clear_error(tmp_path, case):
    case.make(tmp_path)
    for load in loaders(case):
        with pytest.raises(SummaryError) as error:
            load(tmp_path)
        message = str(error.value)
        assert re.search(case.problem, message), message[:400]
        for name in case.names:
            assert str(tmp_path / name) in message, message[:400]
        assert len(message) < 1000


def test_a_full_summary_naming_another_chapter_is_refused_at_its_scale(tmp_path):
    summary = json.loads(with_field("chapter", "06_loss_curve_collapse"))
    summary["scale"] = "full"
    (tmp_path / f"{CHAPTER}.full.json").write_text(json.dumps(summary))
    with pytest.raises(SummaryError, match="06_loss_curve_collapse.full.json"):
        load_summaries(tmp_path, run_scale="full")


def test_every_committed_summary_loads_from_a_copy(tmp_path):
    for path in (ROOT / "book" / "results").glob("*.json"):
        shutil.copy(path, tmp_path)
    quick, full = load_summaries(tmp_path), load_summaries(tmp_path, run_scale="full")
    assert [s["chapter"] for s in quick] == [s["chapter"] for s in full]
    assert len(quick) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.md")))
    loaded, raw = load_summary(CHAPTER, "quick", tmp_path), json.loads(TEXT)
    if raw.get("format", 1) < 2:  # the loader adds the threshold sensitivity of old summaries
        for check in loaded["checks"]:
            for key in ("holds_for", "holds_bound", "holds_text", "fragile"):
                check.pop(key, None)
    assert loaded == raw
    assert load_summary(CHAPTER, "full", tmp_path / "missing") is None
    (tmp_path / f"{CHAPTER}.seed3.json").write_text(with_field("base_seed", 3))  # other seeds
    assert load_summaries(tmp_path) == quick
