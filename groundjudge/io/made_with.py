"""What a report was made with (its ``mode`` and ``versions``), and how two sets of reports differ in it: the one
rule behind refusing a resume of OUT made otherwise (:mod:`groundjudge.runs.out`), compare's warning and gate
(:func:`groundjudge.review.compare.compare_runs`' ``settings_differ``) and the pytest baseline gate. Values come
from report files anyone may have written: they are shown escaped and cut (:func:`shown_text`).

Imports nothing of groundjudge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MadeWith:
    """What a report says it was made with: its ``mode`` and its ``versions`` (``Evaluator.versions``), as sorted
    items; a run that resumes OUT must make its reports with the same (:meth:`Pending.check_made_with`)."""

    mode: str
    versions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, mode: str, versions: Mapping[str, str]) -> MadeWith:
        return cls(str(mode), tuple(sorted((str(k), str(v)) for k, v in versions.items())))


SHOWN = 10
"""Settings a refused resume names at most (the keys of a hostile OUT could be thousands)."""

LATER_KEYS = ("evidence", "verdict", "scoring", "llm_server", "second_judge_server")
"""Keys of a report's ``versions`` groundjudge began to write after its reports had versions: a report without one
(written by an older groundjudge) is not compared on it when a run resumes its OUT."""


SECOND_JUDGE_KEYS = ("second_judge", "second_judge_server", "second_judge_reasoning_effort")
"""Keys of a report's ``versions`` that name its second judge, which never changes a score, verdict or gate (its
verdicts stand beside the first judge's): a resume still keeps to them (:func:`differences`), but two runs that
differ only in them are scored alike (:func:`settings_differ`)."""

_SECOND_SAMPLE = re.compile(r"(?:^| )second_judge_sample=(?:flagged only|\S*)")
"""The second judge's sample in ``versions.scoring`` (``pipeline.evaluator.describe_scoring``, last there)."""


def scored_with(versions: Mapping[str, str]) -> dict[str, str]:
    """``versions`` less what names the second judge (:data:`SECOND_JUDGE_KEYS`, and its sample in ``scoring``):
    the settings that move a report's numbers, as :func:`settings_differ` compares them."""
    out = {k: v for k, v in versions.items() if k not in SECOND_JUDGE_KEYS}
    if isinstance(out.get("scoring"), str):
        out["scoring"] = _SECOND_SAMPLE.sub("", out["scoring"])
    return out


def differences(old: MadeWith, now: MadeWith) -> tuple[list[tuple[str, str, str]], list[str]]:
    """What differs between a report of OUT (``old``) and a run that resumes it (``now``): (key, OUT's value, this
    run's value) for the mode and each key of the versions, ``(none)`` where one has no such key; and, in words, what
    was not compared. Not compared: the versions of a report that has none (an answer that failed before it was
    scored: its mode is all it says), a key of :data:`LATER_KEYS` that the old report lacks, and the device and
    precision in ``nli_model``'s last part (the same weights, read the same way, on a GPU or a CPU: a run stopped
    on one machine may go on on another)."""
    diffs: list[tuple[str, str, str]] = []
    why: list[str] = []
    if old.mode != now.mode:
        diffs.append(("mode", old.mode, now.mode))
    if not old.versions:
        return diffs, why
    was, new = dict(old.versions), dict(now.versions)
    for key in [*new, *(k for k in was if k not in new)]:
        a, b = was.get(key), new.get(key)
        if a == b:
            continue
        if a is None and key in LATER_KEYS:
            why.append(f"versions.{key} (its reports were written before groundjudge recorded it)")
        elif key == "nli_model" and a and b and a.rpartition("/")[0] == b.rpartition("/")[0]:
            why.append(
                f"the NLI model's device and precision ({shown_text(a.rpartition('/')[2])} in OUT, "
                f"{shown_text(b.rpartition('/')[2])} in this run: the same weights, scores that may differ in the last "
                "digits)"
            )
        else:
            diffs.append((key, "(none)" if a is None else a, "(none)" if b is None else b))
    return diffs, why


def settings_differ(a: Iterable[Any], b: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Where two runs' reports were made with other settings, compared as a resume compares them
    (:func:`differences`; reports given as anything with ``mode`` and ``versions``): key -> ``{"a": A's value,
    "b": B's}`` (``compare_runs``' and ``compare --json``'s ``settings_differ``), empty when alike. Neither run is
    the older: a key one side lacks because groundjudge did not write it yet (:data:`LATER_KEYS`) is no difference
    on either side. What ``compare`` and the pytest baseline gate refuse to gate on (another NLI model, thresholds,
    preset, judge or groundjudge's prompts move the numbers with the answers unchanged); the second judge moves
    none, so it is not compared (:func:`scored_with`).

    Key by key over each side's distinct values (:func:`_kinds_of`), in time linear in their items (:func:`_side_kinds`,
    however many keys a hostile file gives its reports): a key differs when
    some value of A and some value of B differ both ways by :func:`differences`' rule, and the first such pair in
    the reports' order is the one named. The mode comes first, then the keys in sorted order."""
    sides = [
        list(dict.fromkeys(MadeWith.of(r.mode, scored_with(r.versions)) for r in run if r.versions)) for run in (a, b)
    ]
    if not sides[0] or not sides[1]:
        return {}
    kinds = [_side_kinds(side) for side in sides]
    said: dict[str, dict[str, str]] = {}
    if (pair := _differing(*(_kinds_of("mode", [m.mode for m in side]) for side in sides))) is not None:
        said["mode"] = {"a": pair[0], "b": pair[1]}
    for key in sorted(kinds[0].keys() | kinds[1].keys()):
        # a key one side never has: each of its reports lacks it
        pair = _differing(*(k[key] if key in k else _kinds_of(key, [None]) for k in kinds))
        if pair is not None:
            said.setdefault(key, {"a": pair[0], "b": pair[1]})
    return said


def _kind(key: str, value: str | None) -> tuple[str, str | None] | None:
    """The kind of one report's value of ``key`` (:func:`_kinds_of`); None for no value (a key of
    :data:`LATER_KEYS` the report lacks)."""
    if value is None and key in LATER_KEYS:
        return None
    return ("weights", value.rpartition("/")[0]) if key == "nli_model" and value else ("value", value)


def _kinds_of(key: str, values: list[str | None]) -> dict[tuple[str, str | None], str]:
    """One side's values of ``key``, first of each kind: values of one kind never differ by :func:`differences`'
    rule (the same value; or ``nli_model`` values of the same weights on another device or precision), values of
    two kinds always do. A key of :data:`LATER_KEYS` a report lacks is no value (never a difference); another key
    a report lacks is ``(none)``."""
    out: dict[tuple[str, str | None], str] = {}
    for v in values:
        if (kind := _kind(key, v)) is not None:
            out.setdefault(kind, "(none)" if v is None else v)
    return out


def _side_kinds(side: list[MadeWith]) -> dict[str, dict[tuple[str, str | None], str]]:
    """:func:`_kinds_of` of every key one side's reports have, in one pass over their items (a hostile file may give
    each report keys of its own: reading every key of every report would be keys x reports). A report that lacks a
    key has ``None`` there, in its place in the reports' order."""
    out: dict[str, dict[tuple[str, str | None], str]] = {}
    expected: dict[str, int] = {}  # per key: the index of the next report, had every report so far held it
    for i, made in enumerate(side):
        for key, value in dict(made.versions).items():
            kinds = out.setdefault(key, {})
            if expected.get(key, 0) < i and (none := _kind(key, None)) is not None:
                kinds.setdefault(none, "(none)")  # an earlier report lacks it
            if (kind := _kind(key, value)) is not None:
                kinds.setdefault(kind, value)
            expected[key] = i + 1
    for key, kinds in out.items():
        if expected[key] < len(side) and (none := _kind(key, None)) is not None:
            kinds.setdefault(none, "(none)")  # a later report lacks it
    return out


def _differing(a: dict[Any, str], b: dict[Any, str]) -> tuple[str, str] | None:
    """The first (A's value, B's value) of two kinds (:func:`_kinds_of`), or None when every pair is of one kind."""
    for kind, value in a.items():
        other = next((v for k, v in b.items() if k != kind), None)
        if other is not None:
            return value, other
    return None


def differ_text(said: Mapping[str, Mapping[str, str]]) -> str:
    """:func:`settings_differ`'s answer in words, for people: its keys and values escaped and cut (the files are
    anyone's), at most :data:`SHOWN` of them."""
    return "; ".join(
        f"{shown_text(key)}: {shown_text(v['a'])} in A, {shown_text(v['b'])} in B"
        for key, v in list(said.items())[:SHOWN]
    )


def shown_text(value: str) -> str:
    """A value from OUT (a file anyone may have written) as safe text: plain when it is plain, else quoted with its
    control characters escaped; cut (:func:`cut_text`)."""
    cut = cut_text(value)
    return cut if PLAIN.fullmatch(cut) else json.dumps(cut)


def cut_text(value: str) -> str:
    """A value of a report's settings cut to 300 characters, as the terminal (:func:`shown_text`) and the compare
    page show it."""
    return value[:300] + ("..." if len(value) > 300 else "")


PLAIN = re.compile(r"[\w .:/@=+,()<>-]*", flags=re.ASCII)
"""Text from OUT shown as it stands (:func:`shown_text`; else quoted, escaped)."""
