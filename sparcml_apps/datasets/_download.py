"""HTTP download to ``NAME.part``: resumed with Range, retried with backoff, size and
checksum checked, then renamed into place."""

import hashlib
import http.client
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from ._errors import ChecksumError, DataHomeError, DownloadError

RETRIES = 5
"""Retries after a timeout, a dropped connection or an HTTP 5xx, each resuming the transfer."""
BACKOFF = 1.0
"""Seconds before the first retry; doubled for each next one."""
TIMEOUT = 60.0
"""Seconds without an answer from the server before a try counts as failed."""
BLOCK = 1 << 20
_USER_AGENT = "sparcml-datasets"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class _Retry(Exception):
    """A failure that another try may get past."""


class _Digest:
    """The digest of the leading bytes of a file, kept in step with it across tries."""

    def __init__(self, algorithm):
        self.algorithm = algorithm
        self.reset()

    def reset(self):
        self.hash = hashlib.new(self.algorithm)
        self.length = 0

    def update(self, chunk):
        self.hash.update(chunk)
        self.length += len(chunk)

    def catch_up(self, path):
        """Make the digest cover exactly the bytes now in ``path``."""
        size = path.stat().st_size if path.exists() else 0
        if size != self.length:
            self.reset()
            with open(path, "rb") as f:
                while chunk := f.read(BLOCK):
                    self.update(chunk)


def file_digest(path, algorithm, progress=False):
    """The hex digest of the file ``path``."""
    path = Path(path)
    digest = hashlib.new(algorithm)
    with (
        open(path, "rb") as f,
        progress_bar(path.stat().st_size, 0, f"{algorithm} {path.name}", progress) as bar,
    ):
        while chunk := f.read(BLOCK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def fetch(url, dest, *, checksum=None, origin=None, size=None, accept=None, progress=True):
    """Download ``url`` to ``dest``; return the sha256 (or the ``checksum`` algorithm) digest.

    Bytes go to ``dest.part``, which a later call resumes with an HTTP Range request.
    ``checksum`` = (algorithm, hex) and ``size`` (bytes), when given, must match (``origin``
    says in errors where the checksum comes from). ``accept(part, hexdigest)``, when given,
    is called on the complete part file and may raise ValueError to refuse it. A refused
    file is deleted and ChecksumError, DownloadError or the error of ``accept`` raised
    (another error of ``accept`` keeps the part, to be checked again next time). Only a
    complete, accepted file replaces ``dest``: a failure or an interrupt leaves ``dest``
    as it was and at most ``dest.part``.
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = _Digest(checksum[0] if checksum else "sha256")
    for attempt in range(RETRIES + 1):
        try:
            _transfer(url, part, digest, size, progress)
            break
        except _Retry as exc:
            if attempt == RETRIES:
                raise DownloadError(f"{url}: failed after {RETRIES} retries: {exc}") from None
            time.sleep(BACKOFF * 2**attempt)
    received = part.stat().st_size
    if size is not None and received != size:
        part.unlink()
        raise DownloadError(f"{url}: expected {size} bytes; received {received}")
    digest.catch_up(part)
    hexdigest = digest.hash.hexdigest()
    try:
        if checksum and hexdigest != checksum[1]:
            raise ChecksumError(url, checksum[0], checksum[1], hexdigest, origin, _note(part))
        if accept is not None:
            accept(part, hexdigest)
    except ValueError:
        part.unlink()
        raise
    os.replace(part, dest)
    return hexdigest


def _note(path):
    """What the start of a file says about it, if it is a web page."""
    with open(path, "rb") as f:
        head = f.read(512).lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "the server sent an HTML page, not the file"
    return None


def _transfer(url, part, digest, size, progress):
    """One try: fetch what ``part`` lacks. Raises _Retry when another try may help."""
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    headers = {"User-Agent": _USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=TIMEOUT
        )
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing past the part: it is complete, or stale
            if offset != _total_of(exc.headers.get("Content-Range", "")):
                part.unlink()
                raise _Retry(f"HTTP 416 for a stale {part.name}; starting over") from None
            return
        if exc.code >= 500 or exc.code in (408, 429):
            raise _Retry(f"HTTP {exc.code} {exc.reason}") from None
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise _Retry(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from None
    with response:
        total = _expected_total(response, offset, url)
        if response.status != 206:
            offset = 0  # the server sent the whole file
        if size is not None and total is not None and total != size:
            raise DownloadError(f"{url}: expected {size} bytes; the server offers {total}")
        most = size if size is not None else total  # bytes the file may have
        _check_room(part, (most or 0) - offset, url)
        with (
            open(part, "ab" if offset else "wb") as out,
            progress_bar(total, offset, part.name, progress) as bar,
        ):
            digest.catch_up(part)
            try:
                while chunk := response.read1(BLOCK):  # what has come, as it comes
                    if most is not None and out.tell() + len(chunk) > most:
                        raise DownloadError(
                            f"{url}: the server sent more than the {most:,} bytes "
                            f"{'the catalogue lists' if size is not None else 'it announced'}"
                        )
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
            except DownloadError:
                raise
            except (http.client.HTTPException, OSError) as exc:
                raise _Retry(f"transfer cut: {type(exc).__name__}: {exc}") from None
            finally:
                out.flush()
                os.fsync(out.fileno())
    received = part.stat().st_size
    if total is not None and received < total:
        raise _Retry(f"connection closed after {received} of {total} bytes")


def _check_room(part, need, url):
    """Raise DataHomeError when the disk of ``part`` has not ``need`` bytes free."""
    free = shutil.disk_usage(part.parent).free
    if need > free:
        raise DataHomeError(
            f"{url}: the download takes {need / 1e6:,.1f} MB more in {part.parent}; the disk "
            f"has {free / 1e6:,.1f} MB free"
        )


def _expected_total(response, offset, url):
    """The full file size the response announces, or None when it does not say."""
    if response.status == 206:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
        if not match or int(match[1]) != offset:
            raise DownloadError(
                f"{url}: asked for bytes from {offset}; the server answered with "
                f"Content-Range {response.headers.get('Content-Range')!r}"
            )
        return None if match[3] == "*" else int(match[3])
    length = response.headers.get("Content-Length")
    return int(length) if length is not None else None


def _total_of(content_range):
    match = re.fullmatch(r"bytes \*/(\d+)", content_range)
    return int(match[1]) if match else None


def read_progress(bar, raw):
    """An ``on_block`` for ``iter_pieces``: ``bar`` shows the bytes of ``raw`` read and
    the rows (lines) parsed."""

    def advance(lines):
        bar.set_postfix_str(f"{lines:,} rows", refresh=False)
        bar.update(raw.tell() - bar.n)

    return advance


def progress_bar(total, initial, name, progress):
    """A tqdm bar of bytes, shown only when ``progress`` is true and stderr a terminal."""
    return tqdm(
        total=total,
        initial=initial,
        desc=name,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=None if progress else True,
        leave=False,
    )
