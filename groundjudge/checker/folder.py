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


def _os_litter(name: str) -> bool:
    """A file a desktop writes into a folder it shows (Finder's .DS_Store and ._ twins, Explorer's Thumbs.db and
    desktop.ini): none of the model; opening the folder must not change its identity."""
    return name in (".DS_Store", "Thumbs.db", "desktop.ini") or name.startswith("._")


def fingerprint_dir(path: Path) -> str:
    """A content hash of a local model folder: the name and whole-content digest of every file in it, but the
    groundjudge.json beside the weights: its thresholds change no probability (what it says about how to run the
    model, kind, label and template, is in the fingerprint apart), and calibrate or tune rewriting it must not void
    the NLI cache; nor the temporary file a writer killed while replacing it leaves beside it, nor a desktop's
    litter."""
    h = hashlib.sha256()
    # in the order of the names' code points on every system (Windows orders paths case-blind: "README.md" after
    # "config.json"), so a folder copied to another system keeps its identity, and the head and thresholds beside it
    for f in sorted(path.iterdir(), key=lambda f: f.name):
        if not f.is_file() or f.name == MODEL_PROFILE_FILE or is_temporary(f.name) or _os_litter(f.name):
            continue  # a temporary file a killed writer left (groundjudge.atomic) is none of the model
        h.update(f.name.encode() + b"\0" + file_digest(f).encode() + b"\0")
    return h.hexdigest()[:16]
