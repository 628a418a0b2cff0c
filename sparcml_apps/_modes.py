"""The modes of new files: those ``open`` and ``mkdir`` give under the umask."""

import os
from pathlib import Path


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
