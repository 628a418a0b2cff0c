"""Downloads under injected faults, from a local HTTP server: for a first download and for
``force`` over a good file, of a file with a published checksum and of one without.

After each fault the data home holds the previous good file (or none) or the new verified
one, a checksum is recorded only for the good file, nothing half-written bears the file's
name, and the next download with the fault gone gives the good file.
"""

import contextlib
import hashlib
import json
import lzma
import warnings
from types import SimpleNamespace

import pytest
from datasets_helpers import libsvm_dir, write_catalog
from httpserver import FileServer

from sparcml_apps import datasets
from sparcml_apps.datasets import ChecksumError, ContentError, DownloadError, _download

A9A = {"task": "binary", "split": "train", "n_samples": 32561, "n_features": 123, "labels": [-1, 1]}
HTML = b"<!DOCTYPE html>\n<html><head><title>Moved</title></head><body>Gone.</body></html>\n"


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """a9a and a9a.t, xz-compressed."""
    folder = tmp_path_factory.mktemp("packed")
    for name in ("a9a", "a9a.t"):
        (folder / f"{name}.xz").write_bytes(lzma.compress((libsvm_dir() / name).read_bytes()))
    return folder


@pytest.fixture
def site(packed, tmp_path, monkeypatch):
    """Two datasets of the same bytes (a9a.xz): ``published`` with its sha256 in the
    catalogue, ``unpublished`` with only its rows and nonzeros; retries are quick and
    transfers come in blocks of 64 KiB."""
    monkeypatch.setattr(_download, "BACKOFF", 0.01)
    monkeypatch.setattr(_download, "RETRIES", 2)
    monkeypatch.setattr(_download, "BLOCK", 1 << 16)
    monkeypatch.delenv("SPARCML_DATASETS_MIRROR", raising=False)
    served = tmp_path / "served"
    served.mkdir()
    good = (packed / "a9a.xz").read_bytes()
    for file in ("published.xz", "unpublished.xz"):
        (served / file).write_bytes(good)
    sha = hashlib.sha256(good).hexdigest()
    records = [
        {"name": "published", "file": "published.xz", "compression": "xz", **A9A},
        {"name": "unpublished", "file": "unpublished.xz", "compression": "xz", **A9A},
    ]
    records[0]["checksum"] = f"sha256:{sha}"
    records[1]["nnz"] = 451592
    with FileServer(served) as server:
        yield SimpleNamespace(
            server=server,
            good=good,
            other=(packed / "a9a.t.xz").read_bytes(),
            sha=sha,
            home=tmp_path / "home",
            catalog=write_catalog(tmp_path / "catalog.toml", records),
        )


REAL_BAR = _download.progress_bar


def interrupting_bar(total, initial, name, progress):
    """A progress bar whose first update in a transfer is a Ctrl-C."""
    bar = REAL_BAR(total, initial, name, progress)
    if name.endswith(".part"):

        def update(n):
            raise KeyboardInterrupt

        bar.update = update
    return bar


# each fault: what the server does to the file, and what the download raises (None: it
# succeeds); a bytes object is served as the file
FAULTS = {
    "404": ([404], DownloadError),
    "500 then 200": ([500], None),
    "cut every time": ([("cut", 5000)] * 3, DownloadError),
    "wrong file": (["other"], (ChecksumError, ContentError)),
    "HTML page": ([HTML], (ChecksumError, ContentError)),
    "wrong size": (["truncated"], (ChecksumError, ContentError)),
    "Ctrl-C": ([], KeyboardInterrupt),
}


@pytest.mark.parametrize("name", ["published", "unpublished"])
@pytest.mark.parametrize("start", ["fresh", "force"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_leaves_the_good_file_or_none(site, monkeypatch, fault, start, name):
    options = {"data_home": site.home, "catalog": site.catalog}
    file = f"{name}.xz"
    target = site.home / "downloads" / file
    warnings.simplefilter("ignore")  # the record of a checksum is checked below
    if start == "force":
        datasets.download(name, mirror=site.server.url, progress=False, **options)
        before = target.stat().st_mtime_ns
    script, raised = FAULTS[fault]
    bodies = {"other": site.other, "truncated": site.good[:-1000], HTML: HTML}
    site.server.script[file] = [
        ("body", bodies[item]) if item in bodies else item for item in script
    ]
    if fault == "Ctrl-C":
        monkeypatch.setattr(_download, "progress_bar", interrupting_bar)
    with pytest.raises(raised) if raised else contextlib.nullcontext():
        datasets.download(
            name, mirror=site.server.url, force=start == "force", progress=False, **options
        )
    monkeypatch.setattr(_download, "progress_bar", REAL_BAR)
    # the good file, or none (a first download that failed)
    if raised is None or start == "force":
        assert target.read_bytes() == site.good
        if raised is not None:
            assert target.stat().st_mtime_ns == before  # not even rewritten
    else:
        assert not target.exists()
        with pytest.raises(FileNotFoundError, match="is not downloaded"):
            datasets.convert(name, download=False, progress=False, **options)
    # nothing else bears the file's name: a partial download is a .part, and only that
    others = {p.name for p in target.parent.iterdir()} - {file, f"{file}.lock"}
    assert others <= {f"{file}.part"}, others
    # a checksum is recorded only for the good file
    recorded = site.home / "checksums.json"
    entries = json.loads(recorded.read_text()) if recorded.exists() else {}
    assert [entry["sha256"] for entry in entries.values()] in ([], [site.sha])
    assert entries == {} or name == "unpublished"
    # with the fault gone, the next download gives the good file, verified
    site.server.script.clear()
    datasets.download(name, mirror=site.server.url, force=True, progress=False, **options)
    assert target.read_bytes() == site.good
    assert datasets.verify(name, progress=False, **options) == f"sha256:{site.sha}"
    assert {p.name for p in target.parent.iterdir()} == {file, f"{file}.lock"}
