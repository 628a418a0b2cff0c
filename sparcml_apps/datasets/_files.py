"""Writing in the data home: locks, taken by writers only, and the modes of new files."""

import os
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from ._errors import DataHomeError
from ._home import HOME_VARIABLE


@contextmanager
def write_lock(home, path):
    """Hold ``path.lock`` (its folder made first) while ``path`` is written.

    Readers take no lock, so a data home that only needs reading may be read-only. Raises
    DataHomeError when the data home cannot be written.
    """
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{path}.lock")
        lock.acquire()
    except OSError as exc:
        raise not_writable(home, exc) from None
    try:
        yield
    finally:
        lock.release()


def not_writable(home, exc):
    """The DataHomeError for the OSError ``exc`` met while writing in the data home."""
    reason = exc.strerror or str(exc)
    where = f": {exc.filename}" if exc.filename else ""
    return DataHomeError(
        f"cannot write in the data home {home} ({reason}{where}); give a writable one with "
        f"--data-home or ${HOME_VARIABLE} (reading a file and a CSR cache already there "
        "needs no write access)"
    )


def umask():
    """The process's umask (read without changing it where /proc tells it)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def set_default_mode(path):
    """Give ``path`` the mode that ``open`` or ``mkdir`` would have given it under the umask
    (``tempfile`` makes files and folders private to their owner)."""
    path = Path(path)
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask())
