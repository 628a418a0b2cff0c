"""The local record of sha256 digests for downloads that have no published checksum."""

import json
import os
import tempfile

from filelock import FileLock

from ._home import manifest_path


def recorded(home, file):
    """The sha256 recorded for ``file`` in the data home ``home``, or None."""
    entry = _read(manifest_path(home)).get(file)
    return entry["sha256"] if entry else None


def record(home, file, sha256, url):
    """Record ``sha256`` as the digest of ``file`` (atomically; safe with other processes)."""
    path = manifest_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):
        entries = _read(path)
        entries[file] = {"sha256": sha256, "url": url}
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entries, f, indent=2, sort_keys=True)
                f.write("\n")
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


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
