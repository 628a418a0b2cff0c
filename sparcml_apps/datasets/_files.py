"""Writing in the data home: locks, taken by writers only."""

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
