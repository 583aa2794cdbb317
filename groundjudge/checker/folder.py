"""What a local model folder is, by content: whole-file digests (memoised per file's size, time and inode) and the
folder's fingerprint, the part of a local checker's identity and cache keys that its weights make."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from groundjudge.atomic import is_temporary
from groundjudge.checker.profile import MODEL_PROFILE_FILE

# Whole-file digests of model files, remembered by (absolute path, size, mtime_ns, inode) for this process only:
# hashing the shared 91 MB model takes about 0.2 s, so a memo on disk is not worth its staleness risks.
_DIGESTS: dict[tuple[str, int, int, int], str] = {}
_DIGESTS_LOCK = threading.Lock()
_RACY_NS = 2 * 10**9  # a file modified this recently may change again within the same mtime tick: never memoised


def file_digest(path: Path) -> str:
    """SHA-256 of a whole file, computed once per (path, size, mtime, inode) in this process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _DIGESTS_LOCK:
        hit = _DIGESTS.get(key)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(2**20):
            h.update(block)
    digest = h.hexdigest()
    if time.time_ns() - st.st_mtime_ns > _RACY_NS:
        with _DIGESTS_LOCK:
            _DIGESTS[key] = digest
    return digest


def fingerprint_dir(path: Path) -> str:
    """A content hash of a local model folder: the name and whole-content digest of every file in it, but the
    groundjudge.json beside the weights: its thresholds change no probability (what it says about how to run the
    model, kind, label and template, is in the fingerprint apart), and calibrate or tune rewriting it must not void
    the NLI cache; nor the temporary file a writer killed while replacing it leaves beside it."""
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if not f.is_file() or f.name == MODEL_PROFILE_FILE or is_temporary(f.name):
            continue  # a temporary file a killed writer left (groundjudge.atomic) is none of the model
        h.update(f.name.encode() + b"\0" + file_digest(f).encode() + b"\0")
    return h.hexdigest()[:16]
