"""Checks of the paths a command is given, before any work: each raises ValueError that
names the path, what was expected and what is there."""

import argparse
import os
import tempfile
from pathlib import Path


class OptionError(ValueError):
    """A command-line option whose value cannot be used, found before any work: its
    message names the option, what was expected and what came."""


def readable_file(path):
    """``path``: an existing file this process can read."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: expected a file; it is a directory")
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{path}: cannot read it (permission denied)")
    return path


def directory(path):
    """``path``: a directory, or nothing yet (read-only use: its files are looked for)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path}: expected a directory; it is a file")
    return path


def writable_folder(path):
    """``path``: a directory, or one that can be made, where files can be written."""
    path = directory(path)
    _check_writable(path, path)
    return path


def writable_file(path):
    """``path``: a file name (not a directory) in a folder where it can be written."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: expected a file name; it is a directory")
    _check_writable(path, path.parent)
    return path


def _check_writable(path, start):
    """``start``, or the nearest folder above it that exists, takes new files."""
    start = Path(start)
    while not start.exists() and start != start.parent:
        start = start.parent
    if not start.is_dir():
        raise ValueError(f"{path}: {start} is not a directory")
    try:  # a real try: permission bits do not tell for root, read-only mounts or /proc
        with tempfile.TemporaryFile(dir=start):
            pass
    except OSError as exc:
        raise ValueError(f"{path}: cannot write in {start} ({exc.strerror})") from None


def option(check):
    """An argparse ``type`` that applies ``check`` (one of the above) to the text given: a
    failure is the usage error ``argument --OPTION: PATH: ...``."""

    def convert(text):
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = check.__name__  # argparse names the type in some errors
    return convert
