"""Small inline SVG plots, written by the project (no plotting dependency, nothing fetched at view time).

Each function returns one ``<svg>`` element as a string, usable inside an HTML page or, with
:func:`standalone`, as an ``.svg`` file. Text is escaped; non-finite numbers are left out, never drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from groundjudge.errors import ArgumentError

# Verdict colours shared with the review page's badges.
VERDICT_COLORS = {
    "PASS": "#2e7d32",
    "WARN": "#b26a00",
    "FAIL": "#c62828",
    "NO_CLAIMS": "#8a8a8a",
    "ERROR": "#555555",
}
_FONT = "font-family='system-ui,sans-serif' font-size='11'"


def _t(value: object) -> str:
    """Text or attribute value safe in SVG/HTML (a lone surrogate shows as its escape)."""
    return escape(str(value).encode("utf-8", "backslashreplace").decode("utf-8"), quote=True)


def _n(x: float) -> str:
    """A coordinate, short."""
    return f"{x:.1f}"


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _open(width: int, height: int, cls: str, label: str) -> str:
    return (
        f"<svg class='gj-plot {cls}' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='{_t(label)}'><title>{_t(label)}</title>"
        f"<rect class='bg' x='0' y='0' width='{width}' height='{height}' fill='#ffffff'/>"
    )


def _close(out: list[str], empty: tuple[float, float] | None) -> str:
    """The plot's SVG: ``out`` closed, with "no data" centred at ``empty`` (x, y) when the plot has nothing."""
    if empty is not None:
        x, y = empty
        out.append(f"<text class='empty' x='{x}' y='{y}' {_FONT} text-anchor='middle'>no data</text>")
    out.append("</svg>")
    return "".join(out)


def standalone(svg: str) -> str:
    """An SVG element as a file of its own: XML declaration and namespace (inline SVG in HTML needs neither)."""
    return (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        + svg.replace("<svg ", "<svg xmlns='http://www.w3.org/2000/svg' ", 1)
        + "\n"
    )


def histogram_svg(
    groups: Mapping[str, Sequence[float | None]],
    *,
    bins: int = 10,
    lo: float = 0.0,
    hi: float = 1.0,
    title: str = "combined score by verdict",
    colors: Mapping[str, str] | None = None,
    width: int = 420,
    height: int = 180,
) -> str:
    """Stacked histogram of values in ``[lo, hi]``, one colour per group (e.g. combined score by verdict).

    Each bar segment is a ``<rect class='bar'>`` with ``data-group``, ``data-bin`` and ``data-count``; values
    that are missing or not finite are left out (and counted in the title's ``n``).
    """
    if bins < 1 or not hi > lo:
        raise ArgumentError("histogram needs bins >= 1 and hi > lo")
    colors = {**VERDICT_COLORS, **(colors or {})}
    palette = ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00"]
    counts: dict[str, list[int]] = {}
    for name, values in groups.items():
        row = [0] * bins
        for v in values:
            if not _finite(v):
                continue
            assert v is not None
            k = min(bins - 1, max(0, int((v - lo) / (hi - lo) * bins)))
            row[k] += 1
        if sum(row):
            counts[name] = row
    n = sum(sum(r) for r in counts.values())
    left, right, top, bottom = 34, 10, 22, 30
    pw, ph = width - left - right, height - top - bottom
    totals = [sum(r[k] for r in counts.values()) for k in range(bins)]
    peak = max(totals, default=0) or 1
    out = [_open(width, height, "gj-histogram", f"{title} (n={n})")]
    out.append(f"<text x='{left}' y='14' {_FONT} font-weight='600'>{_t(title)} (n={n})</text>")
    out.append(f"<line class='axis' x1='{left}' y1='{top + ph}' x2='{left + pw}' y2='{top + ph}' stroke='#444'/>")
    out.append(f"<line class='axis' x1='{left}' y1='{top}' x2='{left}' y2='{top + ph}' stroke='#444'/>")
    out.append(f"<text x='{left - 4}' y='{top + 8}' {_FONT} text-anchor='end'>{peak}</text>")
    out.append(f"<text x='{left - 4}' y='{top + ph}' {_FONT} text-anchor='end'>0</text>")
    bw = pw / bins
    for k in range(bins):
        base: float = top + ph
        for i, (name, row) in enumerate(counts.items()):
            if not row[k]:
                continue
            h = row[k] / peak * ph
            base -= h
            color = colors.get(name, palette[i % len(palette)])
            out.append(
                f"<rect class='bar' data-group='{_t(name)}' data-bin='{k}' data-count='{row[k]}' "
                f"x='{_n(left + k * bw + 1)}' y='{_n(base)}' width='{_n(bw - 2)}' height='{_n(h)}' fill='{color}'>"
                f"<title>{_t(name)}: {row[k]} in [{lo + k * (hi - lo) / bins:.2f}, "
                f"{lo + (k + 1) * (hi - lo) / bins:.2f}{']' if k == bins - 1 else ')'}</title></rect>"
            )
    for k in range(0, bins + 1, max(1, bins // 5)):
        x = left + k * bw
        out.append(
            f"<text x='{_n(x)}' y='{top + ph + 13}' {_FONT} text-anchor='middle'>{lo + k * (hi - lo) / bins:g}</text>"
        )
    lx = left
    for i, name in enumerate(counts):
        color = colors.get(name, palette[i % len(palette)])
        out.append(f"<rect class='legend' x='{lx}' y='{height - 11}' width='9' height='9' fill='{color}'/>")
        label = f"{name} {sum(counts[name])}"
        out.append(f"<text x='{lx + 12}' y='{height - 3}' {_FONT}>{_t(label)}</text>")
        lx += 20 + 7 * len(label)
    return _close(out, None if n else (left + pw / 2, top + ph / 2))


@dataclass(frozen=True)
class Interval:
    """One row of an interval plot: an estimate and its interval; ``bad`` colours it as a regression."""

    name: str
    estimate: float
    lo: float
    hi: float
    bad: bool = False
    note: str = ""


def interval_svg(
    rows: Sequence[Interval], *, title: str = "B - A, mean paired difference with 95% bootstrap CI", width: int = 560
) -> str:
    """Forest plot: one line per row from ``lo`` to ``hi`` with a dot at the estimate, and a line at zero.

    Each row is a ``<g class='interval'>`` with ``data-name``; rows with a non-finite number are left out.
    """
    kept = [r for r in rows if _finite(r.estimate) and _finite(r.lo) and _finite(r.hi)]

    def label(r: Interval) -> str:
        return f"{r.estimate:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}]" + (f" {r.note}" if r.note else "")

    row_h, top, bottom = 26, 24, 26
    left = max(60, int(6.2 * max((len(r.name) for r in kept), default=0)) + 14)  # room for the longest name
    right = max(90, int(6.2 * max((len(label(r)) for r in kept), default=0)) + 12)
    width = max(width, left + right + 240)
    height = top + bottom + row_h * max(1, len(kept))
    pw = width - left - right
    span = max([abs(v) for r in kept for v in (r.lo, r.hi, r.estimate)] + [0.05]) * 1.1

    def x(v: float) -> float:
        return left + (v + span) / (2 * span) * pw

    out = [_open(width, height, "gj-intervals", title)]
    out.append(f"<text x='8' y='15' {_FONT} font-weight='600'>{_t(title)}</text>")
    zero = x(0.0)
    out.append(
        f"<line class='zero' x1='{_n(zero)}' y1='{top - 4}' x2='{_n(zero)}' y2='{height - bottom + 4}' "
        "stroke='#888' stroke-dasharray='3,3'/>"
    )
    for v in (-span, 0.0, span):
        out.append(f"<text x='{_n(x(v))}' y='{height - 8}' {_FONT} text-anchor='middle'>{v:+.2f}</text>")
    for i, r in enumerate(kept):
        y = top + row_h * i + row_h / 2
        color = "#c62828" if r.bad else "#1565c0"
        out.append(f"<g class='interval' data-name='{_t(r.name)}' data-estimate='{r.estimate:.6g}'>")
        out.append(f"<text x='{left - 8}' y='{_n(y + 4)}' {_FONT} text-anchor='end'>{_t(r.name)}</text>")
        out.append(
            f"<line x1='{_n(x(r.lo))}' y1='{_n(y)}' x2='{_n(x(r.hi))}' y2='{_n(y)}' stroke='{color}' stroke-width='3'/>"
        )
        out.append(f"<circle cx='{_n(x(r.estimate))}' cy='{_n(y)}' r='4.5' fill='{color}'/>")
        out.append(f"<text x='{width - right + 8}' y='{_n(y + 4)}' {_FONT}>{_t(label(r))}</text></g>")
    return _close(out, None if kept else (left + pw / 2, top + 16))


@dataclass(frozen=True)
class ReliabilityBin:
    """Claims whose predicted probability fell in ``[lo, hi)``: how many, their mean prediction, the share right."""

    lo: float
    hi: float
    count: int
    mean_predicted: float | None
    observed: float | None


def reliability_svg(
    bins: Sequence[ReliabilityBin],
    *,
    title: str = "reliability of the entailment score",
    width: int = 440,
    height: int = 440,
) -> str:
    """Reliability diagram: the diagonal, one bar per bin at the observed share, a dot at the mean prediction.

    Bars are ``<rect class='bar'>`` with ``data-count``; each bin's count is written above its bar.
    """
    left, right, top, bottom = 44, 14, 26, 44
    pw, ph = width - left - right, height - top - bottom
    total = sum(b.count for b in bins)
    out = [_open(width, height, "gj-reliability", f"{title} (n={total})")]
    out.append(f"<text x='8' y='15' {_FONT} font-weight='600'>{_t(title)} (n={total})</text>")
    out.append(f"<rect class='frame' x='{left}' y='{top}' width='{pw}' height='{ph}' fill='none' stroke='#444'/>")
    out.append(
        f"<line class='diagonal' x1='{left}' y1='{top + ph}' x2='{left + pw}' y2='{top}' stroke='#888' "
        "stroke-dasharray='4,3'/>"
    )
    for k in range(6):
        v = k / 5
        out.append(f"<text x='{_n(left + v * pw)}' y='{top + ph + 14}' {_FONT} text-anchor='middle'>{v:g}</text>")
        out.append(f"<text x='{left - 5}' y='{_n(top + ph - v * ph + 4)}' {_FONT} text-anchor='end'>{v:g}</text>")
    out.append(
        f"<text x='{left + pw / 2}' y='{height - 8}' {_FONT} text-anchor='middle'>predicted entailment (binned)</text>"
    )
    out.append(
        f"<text x='12' y='{top + ph / 2}' {_FONT} text-anchor='middle' "
        f"transform='rotate(-90 12 {top + ph / 2})'>observed share SUPPORTED</text>"
    )
    for b in bins:
        if not b.count or not _finite(b.observed) or not _finite(b.lo) or not _finite(b.hi):
            continue
        assert b.observed is not None
        x0, x1 = left + b.lo * pw, left + b.hi * pw
        h = b.observed * ph
        out.append(
            f"<rect class='bar' data-count='{b.count}' data-observed='{b.observed:.6g}' x='{_n(x0 + 1)}' "
            f"y='{_n(top + ph - h)}' width='{_n(max(0.0, x1 - x0 - 2))}' height='{_n(h)}' fill='#1565c0' "
            f"fill-opacity='0.55'><title>[{b.lo:.2f}, {b.hi:.2f}): {b.count} claims, "
            f"{100 * b.observed:.0f}% SUPPORTED</title></rect>"
        )
        inside = h > ph - 14  # no room above a full bar: the count goes inside it
        fill = "#ffffff" if inside else "#1d1d1f"
        out.append(
            f"<text class='count' x='{_n((x0 + x1) / 2)}' y='{_n(top + ph - h + (12 if inside else -3))}' {_FONT} "
            f"text-anchor='middle' fill='{fill}'>{b.count}</text>"
        )
        if _finite(b.mean_predicted):
            assert b.mean_predicted is not None
            out.append(
                f"<circle class='mean' cx='{_n(left + b.mean_predicted * pw)}' cy='{_n(top + ph - h)}' r='3' "
                "fill='#c62828'/>"
            )
    return _close(out, None if total else (left + pw / 2, top + ph / 2))
