"""The claims map as a figure and a CSV, built from the chapters' summaries alone.

One row per claim of every chapter in the table of contents: its deciding evidence (estimate,
95% interval, criterion) at the quick scale and, where a full-scale summary was committed, at
the full scale, with the negative or positive control of the same check. The scorecard
(book/scorecard.md) draws the figure; as a Sphinx extension (`setup`) this module writes the
same rows to `book/claims_map.csv` in the HTML output after every build, so nothing generated
is committed.

The common scale: an interval is mapped linearly so that the criterion's bound nearest its
estimate sits at 0, the side that meets the criterion is positive, and the interval's half-width
is 1. A check passes when its whole interval is right of 0 (for a symmetric interval: when
its mapped estimate exceeds 1); the mapped estimate is the margin to the criterion in
half-widths.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout: book/_ext/ -> root
CSV_NAME = "claims_map.csv"  # written next to the scorecard page in the HTML output
EDGE = 50.0  # mapped values beyond +-EDGE half-widths are drawn at the edge (the CSV has them)
ARXIV = re.compile(r"arXiv:(\d{4}\.\d{4,5})")

# Okabe-Ito colours (colour-blind safe) and a marker per verdict, so colour is not the only cue
VERDICT_STYLE = {
    "Reproduced": ("#009E73", "o"),
    "Not reproduced": ("#D55E00", "X"),
    "Inconclusive": ("#E69F00", "D"),
    "Not tested": ("#7F7F7F", "s"),
}
CSV_FIELDS = (
    "chapter", "paper_id", "claim_id", "claim", "central", "verdict_quick", "verdict_full",
    "deciding_check", "estimate", "lo", "hi", "criterion", "criterion_low", "criterion_high",
    "margin_half_widths", "replicates", "estimate_full", "lo_full", "hi_full", "premises_met",
    "control", "control_outcome", "untested",
)  # fmt: skip


@dataclass(frozen=True)
class Mapped:
    """An estimate and its interval on the common scale (see the module docstring)."""

    estimate: float
    lo: float
    hi: float


@dataclass(frozen=True)
class ClaimRow:
    """One claim of the map: the claim, its deciding check at each scale, and its control."""

    chapter: str
    title: str
    claim: dict  # the claim as the quick summary states it (the full one's if only it has it)
    quick_claim: dict | None  # the claim in the quick summary
    quick: dict | None  # the deciding evidence check of the quick run (None: not tested)
    full_claim: dict | None  # the claim in the full-scale summary (None: full not run)
    full: dict | None  # the deciding evidence check of the full run

    @property
    def gid(self) -> str:
        """The id of this claim's label in the SVG figure (the browser tests look for it)."""
        return claim_gid(self.chapter, self.claim["id"])


def claim_gid(chapter: str, claim_id: str) -> str:
    return f"claim-{chapter}-{claim_id}"


def to_scale(estimate: float, lo: float, hi: float, low, high) -> Mapped | None:
    """Map (estimate, [lo, hi]) so the criterion bound (`low` or `high`, None when open)
    nearest the estimate is 0, its passing side positive, and the half-width (hi - lo)/2 is 1;
    None when the criterion has no finite bound. A zero-width interval maps to +-EDGE."""
    bounds = [(b, s) for b, s in ((low, 1.0), (high, -1.0)) if b is not None]
    if not bounds or not all(map(math.isfinite, (estimate, lo, hi))):
        return None
    bound, sign = min(bounds, key=lambda b: abs(estimate - b[0]))
    half = (hi - lo) / 2
    if half <= 0:
        side = EDGE if sign * (estimate - bound) > 0 else -EDGE
        return Mapped(side, side, side)
    a, b = sorted((sign * (lo - bound) / half, sign * (hi - bound) / half))
    return Mapped(sign * (estimate - bound) / half, a, b)


def mapped_check(check: dict | None) -> Mapped | None:
    if check is None:
        return None
    return to_scale(check["estimate"], check["lo"], check["hi"], check["low"], check["high"])


def mapped_control(check: dict | None) -> Mapped | None:
    """The check's control on the common scale, judged against the check's own criterion."""
    control = (check or {}).get("control")
    if not control or control.get("estimate") is None:
        return None
    return to_scale(control["estimate"], control["lo"], control["hi"], check["low"],
                    check["high"])  # fmt: skip


def deciding_check(summary: dict, claim: dict) -> dict | None:
    """The evidence check that decided `claim` in `summary` (None for a Not tested claim)."""
    name = claim.get("deciding_check")
    if not name:
        return None
    for check in summary["checks"]:
        if check["kind"] == "evidence" and check["quantity"] == name:
            if check["claim"] == claim["id"]:
                return check
    raise ValueError(f"{summary['chapter']}: claim {claim['id']!r} is decided by "
                     f"{name!r}, which is not one of its evidence checks")  # fmt: skip


def claim_rows(quick: dict[str, dict], full: dict[str, dict]) -> list[ClaimRow]:
    """Every claim of every quick summary (and any only the full one has), chapter by chapter."""
    rows = []
    for chapter, summary in quick.items():
        other = full.get(chapter)
        full_claims = {c["id"]: c for c in other["claims"]} if other else {}
        claims = list(summary["claims"])
        ids = {c["id"] for c in claims}
        claims += [c for c in full_claims.values() if c["id"] not in ids]
        for claim in claims:
            q_claim = claim if claim["id"] in ids else None
            f_claim = full_claims.get(claim["id"])
            rows.append(ClaimRow(
                chapter, summary["title"], claim,
                q_claim, deciding_check(summary, q_claim) if q_claim else None,
                f_claim, deciding_check(other, f_claim) if f_claim else None,
            ))  # fmt: skip
    return rows


# ----------------------------------------------------------------------------- the CSV
def paper_ids(chapters: list[str], root: Path = ROOT) -> dict[str, str]:
    """Chapter -> the arXiv id of its paper: front matter `teaching: paper:` (a key of
    book/references.bib) -> that entry's arXiv number."""
    bib = (root / "book" / "references.bib").read_text(encoding="utf-8")
    entries = dict(re.findall(r"@\w+\{([^,\s]+),(.*?)\n\}", bib, re.S))
    ids = {}
    for chapter in chapters:
        key = front_matter(root / "notebooks" / f"{chapter}.md").get("teaching", {}).get("paper")
        found = ARXIV.search(entries.get(key, "")) if key else None
        ids[chapter] = found.group(1) if found else ""
    return ids


def front_matter(path: Path) -> dict:
    """The YAML front matter of a MyST notebook ({} when it has none)."""
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    return (yaml.safe_load(match.group(1)) or {}) if match else {}


def _premises_met(claim: dict) -> str:
    premises = claim.get("premises", [])
    return f"{sum(p['met'] for p in premises)} of {len(premises)}" if premises else ""


def csv_record(row: ClaimRow, paper_id: str) -> dict:
    """One CSV row: the fields a meta-analyst needs (numbers at full precision)."""
    check, control = row.quick or {}, (row.quick or {}).get("control") or {}
    mapped = mapped_check(row.quick)
    return {
        "chapter": row.chapter, "paper_id": paper_id, "claim_id": row.claim["id"],
        "claim": row.claim["text"], "central": "yes" if row.claim["central"] else "no",
        "verdict_quick": row.quick_claim["verdict"] if row.quick_claim else "not run",
        "verdict_full": row.full_claim["verdict"] if row.full_claim else "not run",
        "deciding_check": check.get("quantity", ""), "estimate": check.get("estimate", ""),
        "lo": check.get("lo", ""), "hi": check.get("hi", ""),
        "criterion": check.get("criterion", ""),
        "criterion_low": "" if check.get("low") is None else check["low"],
        "criterion_high": "" if check.get("high") is None else check["high"],
        "margin_half_widths": "" if mapped is None else round(mapped.estimate, 3),
        "replicates": row.claim.get("replicates", ""),
        "estimate_full": (row.full or {}).get("estimate", ""),
        "lo_full": (row.full or {}).get("lo", ""), "hi_full": (row.full or {}).get("hi", ""),
        "premises_met": _premises_met(row.claim),
        "control": f"{control['kind']}: {control['what']}" if control else "",
        "control_outcome": control.get("outcome", ""),
        "untested": row.claim.get("untested") or "",
    }  # fmt: skip


def csv_text(rows: list[ClaimRow], papers: dict[str, str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_record(row, papers.get(row.chapter, "")) for row in rows)
    return out.getvalue()


def toc_chapters(root: Path = ROOT) -> list[str]:
    """The chapters listed in _toc.yml, in order (e.g. '07_downstream_prediction')."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return [f.split("/")[-1] for f in files if f.startswith("notebooks/")]


def load_rows(root: Path = ROOT) -> list[ClaimRow]:
    """The claims map of the book at `root`: its toc's chapters, their committed summaries."""
    from lib.claims import load_summaries

    chapters = toc_chapters(root)
    results = root / "book" / "results"
    quick = {s["chapter"]: s for s in load_summaries(results)}
    full = {s["chapter"]: s for s in load_summaries(results, run_scale="full")}
    missing = [c for c in chapters if c not in quick]
    if missing:
        raise FileNotFoundError(f"chapters without a saved summary (run them): {missing}")
    return claim_rows({c: quick[c] for c in chapters}, full)


# ----------------------------------------------------------------------------- Sphinx
def write_csv(app, exception) -> None:
    """After an HTML build: write the claims map to <outdir>/book/claims_map.csv."""
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.srcdir)
    rows = load_rows(root)
    target = Path(app.outdir) / "book" / CSV_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(csv_text(rows, paper_ids(toc_chapters(root), root)), encoding="utf-8")


def setup(app) -> dict:
    app.connect("build-finished", write_csv)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# ----------------------------------------------------------------------------- the figure
ROW_IN = 0.3  # inches per row of the figure
WIDTH_IN = 7.0  # in the 688 px content column at 1280 px, 8.5 pt text shows at about 11.6 px
LABELS, DATA, VERDICTS = (0.01, 0.30), (0.31, 0.78), 0.80  # figure-x of the three columns
CONTROL_COLOUR = "#404040"


def _plain(text: str, limit: int) -> str:
    """`text` without TeX markup, cut to `limit` characters (an SVG label is not typeset)."""
    text = re.sub(r"[$\\{}]", "", text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _clip(value: float) -> float:
    return max(-EDGE, min(EDGE, value))


def _interval(ax, mapped: Mapped, y: float, colour: str, marker: str, filled: bool,
              size: float) -> None:  # fmt: skip
    """An interval and its estimate at height `y` (filled: quick scale; hollow: full, control)."""
    ax.plot([_clip(mapped.lo), _clip(mapped.hi)], [y, y], color=colour,
            lw=1.6 if filled else 1.0, solid_capstyle="butt")  # fmt: skip
    ax.plot([_clip(mapped.estimate)], [y], marker=marker, ms=size, color=colour,
            mfc=colour if filled else "white", mew=1.2, ls="none")  # fmt: skip


def _claim(ax, row: ClaimRow, y: float, text) -> None:
    """One claim's row: label, quick interval, control below, full scale above, verdicts."""
    colour, marker = VERDICT_STYLE[row.claim["verdict"]]
    central = row.claim["central"]
    label = text(LABELS[0] + 0.012, y, ("★ " if central else "") + _plain(row.claim["id"], 34),
                 weight="bold" if central else "normal")  # fmt: skip
    label.set_gid(row.gid)
    quick, control = mapped_check(row.quick), mapped_control(row.quick)
    if quick is not None:
        _interval(ax, quick, y, colour, marker, True, 6.5)
    elif row.quick_claim is not None:
        reason = row.claim.get("untested") or row.claim.get("deciding") or "no counting evidence"
        ax.text(-EDGE, y, _plain(f"Not tested: {reason}", 58), va="center", ha="left",
                fontsize=7, style="italic", color="#505050")  # fmt: skip
    if control is not None:
        kind = row.quick["control"]["kind"]
        _interval(ax, control, y + 0.3, CONTROL_COLOUR, "o" if kind == "negative" else "P",
                  False, 4)  # fmt: skip
    if row.full is not None and mapped_check(row.full) is not None:
        f_colour, f_marker = VERDICT_STYLE[row.full_claim["verdict"]]
        _interval(ax, mapped_check(row.full), y - 0.3, f_colour, f_marker, False, 5.5)
    verdict = row.quick_claim["verdict"] if row.quick_claim else "quick: not run"
    text(VERDICTS, y - (0.17 if row.full_claim else 0), verdict, color="black")
    if row.full_claim:
        text(VERDICTS, y + 0.24, f"full: {row.full_claim['verdict']}", fontsize=7,
             color="#404040")  # fmt: skip


def _legend(fig) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker=m, ls="-", ms=6.5, label=v)
               for v, (c, m) in VERDICT_STYLE.items() if v != "Not tested"]  # fmt: skip
    handles += [
        Line2D([], [], color="black", marker="o", mfc="white", ms=5.5, label="full scale (hollow)"),
        Line2D([], [], color=CONTROL_COLOUR, marker="o", mfc="white", ms=4,
               label="negative control"),
        Line2D([], [], color=CONTROL_COLOUR, marker="P", mfc="white", ms=4,
               label="positive control"),
        Line2D([], [], color="none", marker="$★$", mfc="black", mec="black", ms=7,
               label="central claim (bold)"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=7.5, frameon=False,
               bbox_to_anchor=(0.5, 1.0))  # fmt: skip


def draw(rows: list[ClaimRow]):
    """The claims map: one row per claim, grouped by chapter, on the common scale."""
    from matplotlib import transforms
    from matplotlib.figure import Figure

    chapters = list(dict.fromkeys(r.chapter for r in rows))
    n = len(rows) + len(chapters)
    top_in, bottom_in = 0.95, 0.55
    height = top_in + bottom_in + ROW_IN * n
    fig = Figure(figsize=(WIDTH_IN, height))
    ax = fig.add_axes((DATA[0], bottom_in / height, DATA[1] - DATA[0], ROW_IN * n / height))
    mixed = transforms.blended_transform_factory(fig.transFigure, ax.transData)

    def text(x, y, s, **kw):
        kw = {"fontsize": 8.5, "va": "center", "ha": "left", **kw}
        return ax.text(x, y, s, transform=mixed, clip_on=False, **kw)

    y = 0
    for chapter in chapters:
        members = [r for r in rows if r.chapter == chapter]
        ax.axhline(y - 0.5, color="#BBBBBB", lw=0.6, clip_on=False)
        text(LABELS[0], y, _plain(f"{chapter[:2]}  {members[0].title}", 90), weight="bold",
             fontsize=8.5)  # fmt: skip
        for row in members:
            y += 1
            _claim(ax, row, y, text)
        y += 1
    ax.set_xscale("symlog", linthresh=2, linscale=1.5)
    ax.set_xlim(-EDGE * 1.15, EDGE * 1.15)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks([])
    ticks = [-50, -10, -2, -1, 0, 1, 2, 10, 50]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.tick_params(axis="x", labelsize=7.5, top=True, labeltop=True)
    ax.axvspan(-EDGE * 1.15, 0, color="#EEEEEE", zorder=0)
    ax.axvline(0, color="black", lw=1.0, zorder=1)
    ax.axvline(1, color="black", lw=0.8, ls=":", zorder=1)
    for side in ("left", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("margin to the criterion in half-widths of the 95% interval "
                  "(0: the criterion's bound; dotted: pass line)", fontsize=8)  # fmt: skip
    ax.text(0, 1.0 + 0.4 / (ROW_IN * n), "← criterion not met  |  criterion met →",
            transform=transforms.blended_transform_factory(ax.transData, ax.transAxes),
            ha="center", va="bottom", fontsize=7.5)  # fmt: skip
    _legend(fig)
    return fig


def alt_text(rows: list[ClaimRow]) -> str:
    """What the figure shows, in words (its alt text)."""
    counts = {v: sum(r.claim["verdict"] == v for r in rows) for v in VERDICT_STYLE}
    tally = ", ".join(f"{k} {v.lower()}" for v, k in counts.items() if k)
    chapters = len({r.chapter for r in rows})
    return (f"Claims map: {len(rows)} claims from {chapters} chapters ({tally}), one row each, "
            "grouped by chapter. Each tested claim's deciding estimate and 95% interval is "
            "drawn on a common scale where 0 is the criterion's bound and an interval wholly "
            "right of 0 passes; its control sits just below it and the full-scale run just "
            "above.")  # fmt: skip


def svg(rows: list[ClaimRow]) -> str:
    """The figure as inline SVG: text kept as text, one <g id> per claim label (with the claim
    as a hover title), scaled to the page's width, described by its alt text."""
    from html import escape

    import matplotlib as mpl

    out = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "claims-map"}):
        draw(rows).savefig(out, format="svg")
    text = out.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r'<svg([^>]*?) width="[^"]+" height="[^"]+"',
                  lambda m: f'<svg{m.group(1)} width="100%"', text, count=1)  # fmt: skip
    text = text.replace("<svg", f'<svg role="img" aria-label="{escape(alt_text(rows))}"', 1)
    titles = {r.gid: _plain(r.claim["text"], 400) for r in rows}

    def titled(match: re.Match) -> str:
        return f"{match.group(1)}<title>{escape(titles[match.group(2)])}</title>"

    return re.sub(r'(<g id="(claim-[^"]+)">)', titled, text)
