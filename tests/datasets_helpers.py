"""Shared pieces of the dataset tests: the real LIBSVM files, compressed copies, catalogues."""

import bz2
import hashlib
import json
import lzma
import tarfile
from pathlib import Path

import numpy as np
import pytest
from testdata import LIBSVM

MEMBER = "a9a.svm"  # the file inside the test tar.xz, under a folder


def libsvm_dir():
    """The folder of small real LIBSVM files (see its README), or skip the test."""
    if not (LIBSVM / "a9a").is_file():
        pytest.skip(f"no LIBSVM test files at {LIBSVM} (set SPARCML_TEST_DATA to their folder)")
    return LIBSVM


def write_variants(source, folder, stem):
    """Copies of the file ``source`` in ``folder``: {"none": plain, "bz2", "xz", "tar.xz"}.

    The tar.xz holds ``archive/a9a.svm`` (the data) then ``archive/README``.
    """
    data = Path(source).read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "none": folder / stem,
        "bz2": folder / f"{stem}.bz2",
        "xz": folder / f"{stem}.xz",
        "tar.xz": folder / f"{stem}.tar.xz",
    }
    paths["none"].write_bytes(data)
    paths["bz2"].write_bytes(bz2.compress(data))
    paths["xz"].write_bytes(lzma.compress(data))
    readme = folder / "README"
    readme.write_text("not the data\n")
    with tarfile.open(paths["tar.xz"], "w:xz") as archive:
        archive.add(paths["none"], arcname=f"archive/{MEMBER}")
        archive.add(readme, arcname="archive/README")
    readme.unlink()
    return paths


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_catalog(path, records, base_url="http://127.0.0.1:9/nowhere/"):
    """A catalogue TOML file with ``records`` (dicts of catalogue fields)."""
    lines = [f"base_url = {json.dumps(base_url)}"]
    for record in records:
        lines.append("\n[[dataset]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in record.items()]
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def is_mapped(array):
    """Whether ``array`` is a view of a memory-mapped file."""
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = getattr(array, "base", None)
    return False
