"""Streaming decompression: a plain, bz2, xz or tar.xz file read as one binary stream."""

import bz2
import lzma
import tarfile
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from ._errors import ParseError

_MAGIC = ((b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))
_TAR_SUFFIXES = (".tar.xz", ".txz")


def sniff(path):
    """The compression of ``path``, from its first bytes (and name, for tar): none, bz2, xz
    or tar.xz."""
    with open(path, "rb") as f:
        head = f.read(6)
    kind = next((kind for magic, kind in _MAGIC if head.startswith(magic)), "none")
    if kind == "xz" and str(path).endswith(_TAR_SUFFIXES):
        kind = "tar.xz"
    return kind


@contextmanager
def open_data(path, compression=None, member=None):
    """Yield ``(stream, raw)``: the decompressed bytes of ``path`` as a binary stream and the
    file underneath (its position tells how far reading has come).

    ``compression`` (none, bz2, xz, tar.xz) is checked against the file's first bytes; None
    takes what they say. In a tar.xz, ``member`` names the file to read (a path in the
    archive or its last part); None takes the first file. Nothing is read ahead.
    """
    path = Path(path)
    found = sniff(path)
    if compression is not None and found.replace("tar.", "") != compression.replace("tar.", ""):
        raise ValueError(f"{path}: expected {compression} data; the file holds {found} data")
    compression = compression or found
    with open(path, "rb", buffering=0 if compression == "none" else -1) as raw:
        if compression == "none":
            yield raw, raw
        elif compression == "bz2":
            with bz2.BZ2File(raw) as stream:
                yield stream, raw
        elif compression == "xz":
            with lzma.LZMAFile(raw) as stream:
                yield stream, raw
        else:
            with _open_tar(path, raw) as archive:
                yield _member(path, archive, member), raw


def _open_tar(path, raw):
    try:
        return tarfile.open(fileobj=raw, mode="r|xz")
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as exc:
        raise ParseError(path, 1, f"cannot read the tar.xz archive: {exc}") from None


def _member(path, archive, member):
    try:
        for info in archive:
            if info.isfile() and member in (None, info.name, PurePosixPath(info.name).name):
                return archive.extractfile(info)
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as exc:
        raise ParseError(path, 1, f"cannot read the tar.xz archive: {exc}") from None
    wanted = "a file" if member is None else f"the file {member!r}"
    raise ValueError(f"{path}: expected {wanted} in the archive; found none")
