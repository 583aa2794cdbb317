"""Issue 18: the local and the Ray engine write the same OUT, byte for byte, for any generated table.

Hypothesis generates small tables: groundjudge's, RAGAS' (new and old) or DeepEval's column names, or the singular
``context``; extra columns with odd names; ids that are strings, numbers, missing or repeated; answers, questions
and contexts of every JSON type (ints, floats, bools, None, lists, empty strings, unicode); and bad rows. Each is
written as JSONL, CSV and Parquet, and both engines score it in nli mode with the same ``batch_size`` (a pair's NLI
probabilities can move in the 7th digit with its batch mates on some CPUs, so only the same batches are
byte-identical). Either both write the same bytes, or both refuse the file with the same error before writing.

The local Ray of tests/conftest.py (``local_ray``: ``address="local"``, a namespace of its own, so that two test runs
on one machine never join each other's cluster), reused by every example with one actor (fewer CPUs than the cluster
has), which stays kept for the one-actor tests of tests/runs/test_ray.py that follow on the same Ray.
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from groundjudge.config import Config
from groundjudge.runs import score_file
from tests.conftest import SHARED_MODEL

ray = pytest.importorskip("ray")
gj_ray = pytest.importorskip("groundjudge.runs.ray")

pytestmark = pytest.mark.ray

SCHEMES = {
    "groundjudge": ("id", "answer", "contexts", "question"),
    "ragas": ("id", "response", "retrieved_contexts", "user_input"),
    "ragas-old": ("id", "answer", "contexts", "question"),
    "deepeval": ("id", "actual_output", "retrieval_context", "input"),
    "singular": ("sample_id", "answer", "context", "query"),
}
FACTS = [
    "The Eiffel Tower is in Paris.",
    "It was completed in 1889.",
    "The tower is 330 metres tall.",
    "Café Zoë sells crème brûlée.",
    "東京タワーは1958年に完成した。",
    "",
    "  ",
]
TEXT = st.sampled_from(FACTS) | st.text(alphabet="abcé ü.\u00a0\U0001f600\"',;", max_size=12)
ODD = st.none() | st.integers(-3, 3) | st.floats(allow_nan=False, width=32) | st.booleans()


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(columns, rows, raw bad JSONL lines): every column holds one type (Parquet's rule) or None."""
    id_col, answer_col, contexts_col, question_col = SCHEMES[draw(st.sampled_from(sorted(SCHEMES)))]
    types = {
        id_col: draw(st.sampled_from(["str", "int", "none"])),
        answer_col: draw(st.sampled_from(["text", "text", "int", "float", "bool", "list"])),
        contexts_col: draw(st.sampled_from(["list", "list", "text", "mixed-list", "int"])),
    }
    if draw(st.booleans()):
        types[question_col] = draw(st.sampled_from(["text", "int"]))
    extras = st.sampled_from(["extra", "Ünïcode col", "ref, erence", "metadata", "label"])
    for name in draw(st.lists(extras, max_size=2)):
        types[name] = draw(st.sampled_from(["text", "int", "float", "bool"]))
    if draw(st.integers(0, 4)) == 0:
        types.pop(id_col)  # no id column: ids are row numbers
    n = draw(st.integers(1, 5))
    rows = []
    for _ in range(n):
        row: dict[str, Any] = {}
        for col, kind in types.items():
            if draw(st.integers(0, 5)) == 0:
                row[col] = None
            elif col == id_col:
                row[col] = {"str": f"r{draw(st.integers(0, n))}", "int": draw(st.integers(0, n)), "none": None}[kind]
            elif kind == "text":
                row[col] = " ".join(draw(st.lists(TEXT, max_size=3)))
            elif kind == "int":
                row[col] = draw(st.integers(-5, 2000))
            elif kind == "float":
                row[col] = draw(st.floats(allow_nan=False, allow_infinity=False, width=32))
            elif kind == "bool":
                row[col] = draw(st.booleans())
            elif kind == "list":
                row[col] = draw(st.lists(TEXT, max_size=3))
            elif kind == "mixed-list":
                row[col] = [json.dumps(x) if x is not None else x for x in draw(st.lists(ODD, max_size=2))] + ["ok"]
        rows.append(row)
    bad = draw(st.lists(st.sampled_from(["not json", "null", "[1, 2]", '{"id": 5', "\ufeff{}", "{}"]), max_size=2))
    return list(types), rows, bad


def write_jsonl(path: Path, columns: list[str], rows: list[dict[str, Any]], bad: list[str]) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    for j, b in enumerate(bad):
        lines.insert(min(len(lines), 2 * j + 1), b)
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]], bad: list[str]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for j, r in enumerate(rows):
            w.writerow([cell(r.get(c)) for c in columns])
            if j < len(bad):
                w.writerow([bad[j]] * (len(columns) + 1))  # more cells than the header: a bad row
        for b in bad[len(rows) :]:  # every bad row is written, as the JSONL writer writes every bad line
            w.writerow([b] * (len(columns) + 1))
    return path


def write_parquet(path: Path, columns: list[str], rows: list[dict[str, Any]], bad: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows]), path)
    return path


WRITERS = {"jsonl": write_jsonl, "csv": write_csv, "parquet": write_parquet}


@pytest.fixture(scope="module", autouse=True)
def _on_ray(local_ray: Any) -> None:
    """The local Ray of tests/conftest.py (``local_ray``), shared with the other modules that start Ray."""


@contextmanager
def torch_threads_of_an_actor() -> Iterator[None]:
    """This process's torch at the thread count of the Ray engine's one actor (:func:`groundjudge.runs.ray.plan`),
    for the time of a local run. A pair's NLI probabilities move in the 7th digit with the number of threads, and a
    pytest-xdist worker runs torch at its share of the cores (tests/conftest.py): the local engine at 1 thread and
    the actor at 2 wrote 0.720075 and 0.720074 for one neutral probability."""
    import torch

    from groundjudge.runs.ray import plan

    threads = plan(1, None)[3] or torch.get_num_threads()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def outcome(engine: str, src: Path, out: Path, cache: Path, batch_size: int) -> bytes | tuple[str, str]:
    """OUT's bytes, or the refusal (error type and message) when the engine wrote nothing."""
    config = Config(nli_model=str(SHARED_MODEL), cache_dir=str(cache), mode="nli")
    try:  # one contract: the same call, only the engine named differs
        with torch_threads_of_an_actor() if engine == "local" else nullcontext():
            score_file(src, out, config, engine=engine, batch_size=batch_size, actors=1)
    except Exception as exc:
        assert not out.exists(), (engine, exc)
        return type(exc).__name__, str(exc)
    return out.read_bytes()


# each example starts an actor pool twice over (about 20-40 s on 2 cores): few examples keep CI near its budget
@settings(deadline=None, max_examples=5, database=None)
@given(table=tables(), fmt=st.sampled_from(sorted(WRITERS)), batch_size=st.integers(1, 4))
@example(
    table=(
        ["id", "actual_output", "retrieval_context", "input", "extra"],
        [{"id": "r0", "actual_output": None, "retrieval_context": [], "input": "", "extra": ""}],
        ["not json", "not json"],
    ),
    fmt="csv",
    batch_size=1,
)  # more bad rows than good ones: the CSV writer wrote one of the two, and the count expected both
@example(
    table=(
        ["actual_output", "retrieval_context", "extra"],
        [{"actual_output": None, "retrieval_context": None, "extra": None}] * 4
        + [{"actual_output": "The tower is 330 metres tall. ,", "retrieval_context": [',"'], "extra": None}],
        [],
    ),
    fmt="csv",
    batch_size=1,
)  # a neutral probability of 0.7200745 at 1 torch thread and 0.7200744 at 2: the local engine in a pytest-xdist
# worker (1 thread) wrote 0.720075, the actor (2) 0.720074 (torch_threads_of_an_actor)
def test_both_engines_write_the_same_out_for_any_table(
    table: tuple[list[str], list[dict[str, Any]], list[str]], fmt: str, batch_size: int
) -> None:
    columns, rows, bad = table
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = WRITERS[fmt](root / f"in.{fmt}", columns, rows, bad)
        here = outcome("local", src, root / "local.jsonl", root / "c-local", batch_size)
        there = outcome("ray", src, root / "ray.jsonl", root / "c-ray", batch_size)
        assert there == here
        event("refused" if isinstance(here, tuple) else f"{here.count(b'ERROR')} ERROR mentions")
        if isinstance(here, bytes):
            n_rows = len(rows) + (len(bad) if fmt != "parquet" else 0)
            assert here.count(b"\n") == n_rows, here  # one report per row, bad ones too
