"""Writing a whole file atomically: the one temp/replace/cleanup rule of every writer that replaces a file.

A reader, or a crash, sees the old file or the new one, never a part: the new contents go to a temporary file
beside the target (same folder, so the rename never crosses a file system) under a name no other writer holds (a
random name, created exclusively), are flushed and fsynced, and the temporary file is then renamed over the target
(``os.replace``). When anything fails before the rename (the caller's code inside :func:`atomic_writer`, an
encoding error, a full disk), the temporary file is removed and the error goes on as it was raised; the target is
untouched. Two writers of one path, threads or processes, each write their own temporary file: the last rename
wins and the file is one whole version.

The new file gets the permissions ``open()`` would give it (``mode`` less the umask; 0o666 by default), not the
replaced file's. Text is UTF-8 with ``open()``'s newline rule (``"\\n"`` written as ``os.linesep``).

A target that is a symbolic link is replaced by a regular file (the link's target keeps its old contents). A
process killed outright (SIGKILL, out of memory, power loss) leaves its temporary file (:func:`is_temporary` tells
one by its name): readers of a folder's contents skip them.

Imports nothing of groundjudge: every layer may use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

__all__ = ["atomic_write_text", "atomic_writer", "is_temporary"]

_TRIES = 100  # random names to try before the last one's error is raised (a clash is 1 in 2**48 a try)
_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
)  # as tempfile.mkstemp: a new file only, never through a link, no text translation below the Python file


_TEMPORARY = re.compile(r".+\.[0-9a-f]{12}\.tmp")


def same_file(target: str | Path, source: str | Path) -> bool:
    """Whether a file to write, ``target``, is ``source`` (a file read, or another file to write): the same path
    once resolved (neither need exist yet), or the same existing file by any link or hard link to it. Writing it
    would replace what it is made from, or what the other write made: the one rule of the runs' OUT and the
    commands' files to write."""
    try:
        if Path(target).resolve() == Path(source).resolve():
            return True
        return Path(target).exists() and Path(source).exists() and Path(target).samefile(source)
    except OSError:  # unreadable: not known to be the same; the write itself will say what is wrong
        return False


def is_temporary(name: str) -> bool:
    """Whether a file name is one of this module's temporary files (``NAME.<12 hex digits>.tmp``)."""
    return _TEMPORARY.fullmatch(name) is not None


def _create_beside(path: Path, mode: int) -> tuple[int, Path]:
    """A new, empty file in ``path``'s folder under a name no other writer holds: its descriptor and its path."""

    def beside() -> Path:
        return path.with_name(f"{path.name}.{secrets.token_hex(6)}.tmp")

    for _ in range(_TRIES - 1):
        tmp = beside()
        with contextlib.suppress(FileExistsError):
            return os.open(tmp, _FLAGS, mode), tmp
    tmp = beside()
    return os.open(tmp, _FLAGS, mode), tmp  # the last try: a clash here goes on as the OS's error


@overload
def atomic_writer(
    path: str | Path, *, binary: Literal[False] = False, mode: int = 0o666
) -> AbstractContextManager[TextIO]: ...


@overload
def atomic_writer(
    path: str | Path, *, binary: Literal[True], mode: int = 0o666
) -> AbstractContextManager[BinaryIO]: ...


def atomic_writer(path: str | Path, *, binary: bool = False, mode: int = 0o666) -> AbstractContextManager[IO[Any]]:
    """Write ``path`` through a file opened on a temporary file beside it, renamed over ``path`` when the block ends.

    ``with atomic_writer(path) as f: f.write(...)``: the file is text (UTF-8), or bytes with ``binary=True``. An
    error inside the block (or while writing, flushing or renaming) leaves ``path`` as it was and no temporary
    file; the error goes on as raised. The folder must exist.

    Args:
        path: The file to replace (or create).
        binary: Open the temporary file for bytes.
        mode: Permission bits for the new file, less the umask (as ``open()``).
    """
    return _replacing(Path(path), binary=binary, mode=mode)


@contextmanager
def _replacing(path: Path, *, binary: bool, mode: int) -> Iterator[IO[Any]]:
    fd, tmp = _create_beside(path, mode)
    try:
        try:
            f: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # the error that stopped the write is the one to see
            tmp.unlink()
        raise


def atomic_write_text(path: str | Path, text: str, *, mode: int = 0o666) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically: see :func:`atomic_writer`.

    Args:
        path: The file to replace (or create); its folder must exist.
        text: The whole new contents.
        mode: Permission bits for the new file, less the umask (as ``open()``).
    """
    with atomic_writer(path, mode=mode) as f:
        f.write(text)
