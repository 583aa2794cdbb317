"""The one atomic file writer (``groundjudge.atomic``): a reader or a crash sees the old file or the new one, never a
part; a failed write leaves the old file whole and no temporary file; two writers of one path, threads or
processes, leave one whole version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groundjudge.atomic as atomic
from groundjudge.atomic import atomic_write_text, atomic_writer, is_temporary

OLD = b"the old contents, whole\n"


def _target(folder: Path) -> Path:
    path = folder / "state.json"
    path.write_bytes(OLD)
    return path


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_text_is_written_whole_as_utf8_and_no_temp_file_is_left(tmp_path: Path) -> None:
    path = _target(tmp_path)
    atomic_write_text(path, '{"claim": "Zürich — 9 °C"}\n')
    assert path.read_bytes() == '{"claim": "Zürich — 9 °C"}\n'.encode()
    assert _names(tmp_path) == ["state.json"]


def test_the_writer_creates_a_missing_file_and_writes_bytes_as_given(tmp_path: Path) -> None:
    path = tmp_path / "new.bin"
    with atomic_writer(str(path), binary=True) as f:
        f.write(b"\x00\r\n\xff")
    assert path.read_bytes() == b"\x00\r\n\xff" and _names(tmp_path) == ["new.bin"]


def test_an_object_that_cannot_be_serialised_midway_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = _target(tmp_path)
    with pytest.raises(TypeError, match="not JSON serializable"), atomic_writer(path) as f:
        f.write("[\n")
        json.dump({"kept": list(range(1000)), "broken": {1, 2}}, f)  # writes the first key, then fails
    assert path.read_bytes() == OLD
    assert _names(tmp_path) == ["state.json"]


def test_an_interrupt_inside_the_block_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = _target(tmp_path)
    with pytest.raises(KeyboardInterrupt), atomic_writer(path, binary=True) as f:
        f.write(b"x" * 100_000)
        f.flush()
        assert len(_names(tmp_path)) == 2  # the temporary file, beside the target
        raise KeyboardInterrupt
    assert path.read_bytes() == OLD and _names(tmp_path) == ["state.json"]


def test_text_that_cannot_be_encoded_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = _target(tmp_path)
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "a lone surrogate: \ud800")
    assert path.read_bytes() == OLD and _names(tmp_path) == ["state.json"]


def test_a_missing_folder_raises_the_os_error_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write_text(tmp_path / "no" / "such.json", "{}")
    assert _names(tmp_path) == []


def test_the_file_is_fsynced_before_it_replaces_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _target(tmp_path)
    events: list[str] = []
    fsync, replace = os.fsync, os.replace

    def fsync_spy(fd: int) -> None:
        events.append("fsync")
        fsync(fd)

    def replace_spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append("replace")
        replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync_spy)
    monkeypatch.setattr(atomic.os, "replace", replace_spy)
    atomic_write_text(path, "new\n")
    assert events == ["fsync", "replace"] and path.read_bytes() == b"new\n"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_the_new_file_gets_the_mode_open_would_give_or_the_one_asked_for(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    path = _target(tmp_path)
    os.chmod(path, 0o640)  # the replaced file's mode is not kept: the new file is made as open() makes one
    atomic_write_text(path, "{}")
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    atomic_write_text(path, "{}", mode=0o600)
    assert path.stat().st_mode & 0o777 == 0o600


def _versions(n: int) -> list[bytes]:
    # large enough that a write takes many syscalls, each line naming its version, so a mix of two is seen
    return [(f"version {i}\n" * 20_000).encode() for i in range(n)]


def test_two_threads_writing_one_path_leave_one_whole_version(tmp_path: Path) -> None:
    path = _target(tmp_path)
    versions = _versions(2)
    seen: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def write(data: bytes) -> None:
        try:
            for _ in range(40):
                with atomic_writer(path, binary=True) as f:
                    for k in range(0, len(data), 4096):
                        f.write(data[k : k + 4096])
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        while not stop.is_set():
            seen.append(path.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(v,)) for v in versions]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert errors == []
    assert path.read_bytes() in versions
    assert {s for s in seen if s not in (OLD, *versions)} == set()  # a reader never saw a part or a mix
    assert _names(tmp_path) == ["state.json"]


_CHILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
data = (f"version {sys.argv[3]}\\n" * 20_000).encode()
for _ in range(30):
    with atomic.atomic_writer(sys.argv[2], binary=True) as f:
        for k in range(0, len(data), 4096):
            f.write(data[k : k + 4096])
"""


def test_two_processes_writing_one_path_leave_one_whole_version(tmp_path: Path) -> None:
    path = _target(tmp_path)
    # the module imports nothing of groundjudge, so a child loads it alone (no torch, no pipeline to import)
    cmd = [sys.executable, "-c", _CHILD, atomic.__file__, str(path)]
    children = [subprocess.Popen([*cmd, str(i)], stderr=subprocess.PIPE) for i in range(2)]
    seen = []
    while any(c.poll() is None for c in children):
        seen.append(path.read_bytes())
    for c in children:
        _, err = c.communicate()
        assert c.returncode == 0, err.decode()
    versions = _versions(2)
    assert path.read_bytes() in versions
    assert {s for s in seen if s not in (OLD, *versions)} == set()
    assert _names(tmp_path) == ["state.json"]


@settings(max_examples=60, deadline=None)
# st.text() never draws a lone surrogate (it cannot be encoded): the lists of characters do, now and then
@given(text=st.lists(st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff"]))).map("".join))
def test_any_text_is_written_exactly_or_the_old_file_stays_whole(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _target(Path(folder))
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:
            encoded = None
        if encoded is None:
            with pytest.raises(UnicodeEncodeError):
                atomic_write_text(path, text)
            assert path.read_bytes() == OLD
        else:
            atomic_write_text(path, text)
            assert path.read_bytes() == (encoded if os.linesep == "\n" else text.replace("\n", os.linesep).encode())
        assert _names(Path(folder)) == ["state.json"]


def test_is_temporary_knows_the_writers_own_names_and_no_others(tmp_path: Path) -> None:
    target = tmp_path / "groundjudge.json"
    with atomic_writer(target) as f:
        f.write("{}")
        (temporary,) = [p.name for p in tmp_path.iterdir()]  # the writer's temporary file, mid-write
    assert is_temporary(temporary) and [p.name for p in tmp_path.iterdir()] == [target.name]
    assert not is_temporary(target.name) and not is_temporary("model.safetensors")
    assert not is_temporary("notes.tmp") and not is_temporary("x.0123456789ab.tmp.bak")
