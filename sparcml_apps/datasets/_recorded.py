"""The local record of sha256 digests for downloads that have no published checksum."""

import json
import os
import tempfile

from .._modes import set_default_mode
from ._files import not_writable, write_lock
from ._home import manifest_path


def recorded(home, file):
    """The sha256 recorded for ``file`` in the data home ``home``, or None."""
    entry = _read(manifest_path(home)).get(file)
    return entry["sha256"] if entry else None


def record(home, file, sha256, url):
    """Record ``sha256`` as the digest of ``file`` (atomically; safe with other processes)."""
    _change(home, lambda entries: entries.update({file: {"sha256": sha256, "url": url}}))


def forget(home, file):
    """Remove the record of ``file``; return it (``{"sha256", "url"}``), or None if none."""
    if file not in _read(manifest_path(home)):
        return None
    return _change(home, lambda entries: entries.pop(file, None))


def _change(home, edit):
    """Apply ``edit`` to the records under the lock and write them back; edit's result."""
    path = manifest_path(home)
    with write_lock(home, path):
        entries = _read(path)
        result = edit(entries)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        except OSError as exc:
            raise not_writable(home, exc) from None
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entries, f, indent=2, sort_keys=True)
                f.write("\n")
            set_default_mode(tmp)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return result


def _read(path):
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: expected the JSON record of checksums: {exc}") from None
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: expected a JSON object; got {type(entries).__name__}")
    return entries
