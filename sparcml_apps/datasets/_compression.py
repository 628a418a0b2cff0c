"""Streaming decompression: a plain, gzip, bz2, xz or tar.xz file read as one binary
stream."""

import bz2
import gzip
import io
import lzma
import tarfile
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from ._errors import ContentError, ParseError

_MAGIC = ((b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b", "gz"))
_TAR_SUFFIXES = (".tar.xz", ".txz")


def sniff(path):
    """The compression of ``path``, from its first bytes (and name, for tar): none, gz, bz2,
    xz or tar.xz."""
    with open(path, "rb") as f:
        head = f.read(6)
    kind = next((kind for magic, kind in _MAGIC if head.startswith(magic)), "none")
    if kind == "xz" and str(path).endswith(_TAR_SUFFIXES):
        kind = "tar.xz"
    return kind


@contextmanager
def open_data(path, compression=None, member=None, *, digest=None, name=None):
    """Yield ``(stream, raw)``: the decompressed bytes of ``path`` as a binary stream and the
    file underneath (its position tells how far reading has come).

    ``compression`` (none, gz, bz2, xz, tar.xz) is checked against the file's first bytes;
    None takes what they say. In a tar.xz, ``member`` names the file to read (a path in the
    archive or its last part); None takes the first file. Nothing is read ahead. With
    ``digest`` (a hashlib object), ``raw`` feeds it every byte read and its ``finish()``
    reads what is left, so that the digest is that of the bytes the stream came from.
    ``name`` (default: the path) names the file in errors.
    """
    path = Path(path)
    name = name or path
    found = sniff(path)
    if compression is not None and found.replace("tar.", "") != compression.replace("tar.", ""):
        raise ContentError(f"{name}: expected {compression} data; {_holds(path, found)}")
    compression = compression or found
    with open(path, "rb", buffering=0 if compression == "none" else -1) as file:
        raw = file if digest is None else _Tap(file, digest)
        if compression == "none":
            yield raw, raw
        elif compression == "gz":
            with gzip.GzipFile(fileobj=raw) as stream:
                yield stream, raw
        elif compression == "bz2":
            with bz2.BZ2File(raw) as stream:
                yield stream, raw
        elif compression == "xz":
            with lzma.LZMAFile(raw) as stream:
                yield stream, raw
        else:
            with _open_tar(name, raw) as archive:
                yield _member(name, archive, member), raw


def _holds(path, found):
    if found != "none":
        return f"the file holds {found} data"
    with open(path, "rb") as f:
        head = f.read(48)
    return f"the file is not compressed: it begins {head!r}" if head else "the file is empty"


class _Tap(io.RawIOBase):
    """A file read through, feeding ``digest`` every byte read."""

    def __init__(self, file, digest):
        self.file = file
        self.digest = digest

    def readable(self):
        return True

    def readinto(self, buffer):
        got = self.file.readinto(buffer)
        self.digest.update(memoryview(buffer)[:got])
        return got

    def tell(self):
        return self.file.tell()

    def fileno(self):
        return self.file.fileno()

    def finish(self):
        """Read to the end of the file; the hex digest of all its bytes."""
        while self.read(1 << 20):
            pass
        return self.digest.hexdigest()


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
