"""The Ray engine's wire batches (``runs.ray._wire_batch``), as plain functions: no Ray started."""

from __future__ import annotations

import pytest

from groundjudge.errors import ConfigError

pa = pytest.importorskip("pyarrow")
ray_engine = pytest.importorskip("groundjudge.runs.ray")

P = "The library opens at 9 am."


def test_a_ray_batch_that_repeats_a_column_is_a_usage_error() -> None:
    """The Ray engine maps each batch of a dataset with to_pylist, which keeps the last of two same-named columns;
    every batch is checked, since a later file of a dataset may bring the repeat."""
    arrays = [pa.array([1]), pa.array(["At 9."]), pa.array([[P]]), pa.array(["The moon is cheese."])]
    batch = pa.RecordBatch.from_arrays(arrays, names=["_n", "answer", "contexts", "answer"])
    with pytest.raises(ConfigError, match=r"^a batch of the dataset has two columns named 'answer'"):
        ray_engine._wire_batch(batch, "_n")
    good = pa.RecordBatch.from_arrays(arrays[:3], names=["_n", "answer", "contexts"])
    assert ray_engine._wire_batch(good, "_n")["_gj_row"] == [1]
