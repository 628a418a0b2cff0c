"""Download, verification, conversion and loading, from a local HTTP server."""

import hashlib
import io
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from datasets_helpers import (
    MEMBER,
    is_mapped,
    libsvm_dir,
    sha256,
    write_catalog,
    write_variants,
)
from httpserver import FileServer
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from sparcml_apps import datasets
from sparcml_apps.datasets import ChecksumError, ContentError, DownloadError, _download

A9A = {"task": "binary", "split": "train", "n_samples": 32561, "n_features": 123, "labels": [-1, 1]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The files to serve (a9a plain, bz2, xz, tar.xz; a generated url-like file) and the
    catalogue records of them, with their checksums; made once."""
    folder = tmp_path_factory.mktemp("served")
    paths = write_variants(libsvm_dir() / "a9a", folder, "a9a")
    X, y = datasets.make_url_like(3000, n_features=20000, random_state=5)
    dump_svmlight_file(X, y, str(folder / "url-like.svm"), zero_based=False)
    (folder / "url-like.svm.xz").write_bytes(lzma.compress((folder / "url-like.svm").read_bytes()))
    (folder / "copy.xz").write_bytes(paths["xz"].read_bytes())
    records = [
        {
            "name": "a9a",
            "file": "a9a",
            "compression": "none",
            **A9A,
            "checksum": f"sha256:{sha256(paths['none'])}",
        },
        {
            "name": "a9a-bz2",
            "file": "a9a.bz2",
            "compression": "bz2",
            **A9A,
            "checksum": f"md5:{hashlib.md5(paths['bz2'].read_bytes()).hexdigest()}",
            "size": paths["bz2"].stat().st_size,
        },
        {
            "name": "a9a-xz",
            "file": "a9a.xz",
            "compression": "xz",
            **A9A,
            "checksum": f"sha256:{sha256(paths['xz'])}",
        },
        {
            "name": "a9a-tar",
            "file": "a9a.tar.xz",
            "compression": "tar.xz",
            "member": MEMBER,
            **A9A,
            "checksum": f"sha256:{sha256(paths['tar.xz'])}",
        },
        {
            "name": "url-like",
            "file": "url-like.svm.xz",
            "compression": "xz",
            "task": "binary",
            "split": "all",
            "n_samples": 3000,
            "n_features": 20000,
            "labels": [-1, 1],
        },
        {
            "name": "wrong",
            "file": "copy.xz",
            "compression": "xz",
            **A9A,
            "checksum": "sha256:" + "0" * 64,
        },
        {"name": "missing", "file": "missing.bz2", "compression": "bz2", **A9A},
    ]
    return folder, records


@pytest.fixture
def site(files, tmp_path, monkeypatch):
    """A local HTTP server of a fresh copy of ``files``, a catalogue of them and an empty
    data home; retries wait milliseconds."""
    monkeypatch.setattr(_download, "BACKOFF", 0.01)
    monkeypatch.delenv("SPARCML_DATASETS_MIRROR", raising=False)
    served = shutil.copytree(files[0], tmp_path / "served")
    records = files[1]
    with FileServer(served) as server:
        yield SimpleNamespace(
            server=server,
            served=served,
            home=tmp_path / "home",
            catalog=write_catalog(tmp_path / "catalog.toml", records),
        )


def options(site):
    return {"data_home": site.home, "mirror": site.server.url, "catalog": site.catalog}


@pytest.mark.parametrize("name", ["a9a", "a9a-bz2", "a9a-xz", "a9a-tar"])
def test_download_and_load_equal_scikit_learn(site, name):
    X, y = datasets.load(name, progress=False, **options(site))
    X_ref, y_ref = load_svmlight_file(str(libsvm_dir() / "a9a"), zero_based=False)
    assert X.shape == X_ref.shape == (32561, 123)
    assert (X != X_ref).nnz == 0
    np.testing.assert_array_equal(X.indptr, X_ref.indptr)
    np.testing.assert_array_equal(y, y_ref)
    assert is_mapped(X.data) and is_mapped(X.indices) and is_mapped(X.indptr) and is_mapped(y)
    assert X.indices.dtype == X.indptr.dtype == np.int32
    served = site.served / site.server.requests[0][0]
    downloaded = datasets.dataset_path(name, data_home=site.home, catalog=site.catalog)
    assert sha256(downloaded) == sha256(served)


def test_generated_file_is_recorded_and_loads_like_scikit_learn(site):
    with pytest.warns(UserWarning, match="no published checksum: recorded sha256 ([0-9a-f]{64})"):
        X, y = datasets.load("url-like", progress=False, **options(site))
    X_ref, y_ref = load_svmlight_file(
        str(site.served / "url-like.svm"), n_features=20000, zero_based=False
    )
    assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref)
    recorded = (site.home / "checksums.json").read_text()
    assert sha256(site.served / "url-like.svm.xz") in recorded
    # from now on the recorded digest is checked: a changed file on the server is refused,
    # and the good file stays
    good = sha256(site.served / "url-like.svm.xz")
    (site.served / "url-like.svm.xz").write_bytes(lzma.compress(b"1 1:1\n"))
    with pytest.raises(ChecksumError) as caught:
        datasets.download("url-like", force=True, progress=False, **options(site))
    assert f"sha256 mismatch: expected {good} (recorded at its first download in " in str(
        caught.value
    )
    assert "checksums.json; `sparcml-datasets forget url-like` forgets it)" in str(caught.value)
    target = datasets.dataset_path("url-like", data_home=site.home, catalog=site.catalog)
    assert sha256(target) == good


def test_cut_transfer_resumes_with_range_and_gives_the_right_checksum(site, monkeypatch):
    site.server.script["a9a.bz2"] = [("cut", 100_000)]
    monkeypatch.setattr(_download, "RETRIES", 0)
    with pytest.raises(DownloadError, match="failed after 0 retries: connection closed after"):
        datasets.download("a9a-bz2", progress=False, **options(site))
    target = datasets.dataset_path("a9a-bz2", data_home=site.home, catalog=site.catalog)
    part = target.with_name(target.name + ".part")
    assert not target.exists() and part.stat().st_size == 100_000
    assert datasets.download("a9a-bz2", progress=False, **options(site)) == target
    assert site.server.requests == [("a9a.bz2", None), ("a9a.bz2", "bytes=100000-")]
    assert sha256(target) == sha256(site.served / "a9a.bz2") and not part.exists()


def test_cut_transfer_is_retried_within_one_call(site):
    site.server.script["a9a.xz"] = [("cut", 1000), ("cut", 5000)]
    target = datasets.download("a9a-xz", progress=False, **options(site))
    assert [r for _, r in site.server.requests] == [None, "bytes=1000-", "bytes=6000-"]
    assert sha256(target) == sha256(site.served / "a9a.xz")


def test_404_fails_clearly_without_retries(site):
    with pytest.raises(DownloadError, match=r"missing\.bz2: HTTP 404 Not Found"):
        datasets.download("missing", progress=False, **options(site))
    assert len(site.server.requests) == 1
    assert not list((site.home / "downloads").glob("missing*[!k]"))  # nothing but the lock


def test_500_then_200_and_a_stall_are_retried(site, monkeypatch):
    monkeypatch.setattr(_download, "TIMEOUT", 1.0)
    site.server.script["a9a"] = [500, ("stall", 2.0), 503]
    target = datasets.download("a9a", progress=False, **options(site))
    assert len(site.server.requests) == 4
    assert sha256(target) == sha256(site.served / "a9a")


def test_retries_run_out(site, monkeypatch):
    monkeypatch.setattr(_download, "RETRIES", 2)
    site.server.script["a9a"] = [500, 500, 500, 500]
    with pytest.raises(DownloadError, match="failed after 2 retries: HTTP 500"):
        datasets.download("a9a", progress=False, **options(site))
    assert len(site.server.requests) == 3


def test_checksum_mismatch_names_both_digests_and_leaves_no_file(site):
    with pytest.raises(ChecksumError) as caught:
        datasets.download("wrong", progress=False, **options(site))
    message = str(caught.value)
    assert f"expected {'0' * 64} (published in the catalogue {site.catalog}), " in message
    assert message.endswith(f"received {sha256(site.served / 'copy.xz')}")
    assert not [p for p in (site.home / "downloads").iterdir() if not p.name.endswith(".lock")]


def test_size_mismatch_fails_before_the_transfer(site):
    size = (site.served / "a9a.bz2").stat().st_size
    site.catalog.write_text(site.catalog.read_text().replace(f"size = {size}", "size = 123"))
    with pytest.raises(DownloadError, match=f"expected 123 bytes; the server offers {size}"):
        datasets.download("a9a-bz2", progress=False, **options(site))


def test_environment_sets_mirror_and_data_home(site, monkeypatch):
    monkeypatch.setenv("SPARCML_DATASETS_MIRROR", site.server.url.rstrip("/"))
    monkeypatch.setenv("SPARCML_DATA_HOME", str(site.home))
    target = datasets.download("a9a", progress=False, catalog=site.catalog)
    assert target == site.home / "downloads" / "a9a" and target.exists()


def test_verify_detects_a_changed_file(site):
    target = datasets.download("a9a-bz2", progress=False, **options(site))
    digest = hashlib.md5(target.read_bytes()).hexdigest()
    assert (
        datasets.verify("a9a-bz2", data_home=site.home, catalog=site.catalog, progress=False)
        == f"md5:{digest}"
    )
    target.write_bytes(target.read_bytes()[:-1] + b"x")
    with pytest.raises(ChecksumError, match=f"md5 mismatch: expected {digest} .*, received") as e:
        datasets.verify("a9a-bz2", data_home=site.home, catalog=site.catalog)
    assert str(e.value).endswith("`sparcml-datasets download a9a-bz2 --force` fetches it again")


def test_corrupt_download_is_refused_and_leaves_no_file_or_cache(site):
    packed = (site.served / "url-like.svm.xz").read_bytes()
    (site.served / "url-like.svm.xz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ContentError, match=r"url-like\.svm\.xz, line \d+: cannot read") as e:
        datasets.load("url-like", progress=False, **options(site))
    assert str(e.value).endswith("it was deleted and nothing recorded")
    assert [p.name for p in (site.home / "csr").iterdir()] == ["url-like.lock"]
    assert sorted(p.name for p in (site.home / "downloads").iterdir()) == ["url-like.svm.xz.lock"]
    assert not (site.home / "checksums.json").exists()


def test_conversion_is_cached_and_forced_again(site):
    cache = datasets.convert("a9a", progress=False, **options(site))
    manifest = (cache / "manifest.json").read_text()
    assert '"shape": [\n    32561,\n    123\n  ]' in manifest and '"nnz": 451592' in manifest
    stamp = (cache / "data.npy").stat().st_mtime_ns
    assert datasets.convert("a9a", progress=False, **options(site)) == cache
    assert (cache / "data.npy").stat().st_mtime_ns == stamp
    datasets.convert("a9a", force=True, progress=False, **options(site))
    assert (cache / "data.npy").stat().st_mtime_ns != stamp
    assert sorted(p.name for p in cache.parent.iterdir()) == ["a9a", "a9a.lock"]
    assert len(site.server.requests) == 1


def test_load_without_download_names_the_command(site):
    with pytest.raises(FileNotFoundError, match="run `sparcml-datasets download a9a`"):
        datasets.load("a9a", download=False, **options(site))


CLIENT = """
import sys
from sparcml_apps import datasets
print(datasets.download(sys.argv[1], data_home=sys.argv[2], mirror=sys.argv[3],
                        catalog=sys.argv[4], progress=False))
"""


def test_concurrent_processes_download_once(site):
    site.server.script["a9a.xz"] = [("slow", 2.0)]
    arguments = ["a9a-xz", str(site.home), site.server.url, str(site.catalog)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, *arguments], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=120)[0].strip() for process in processes]
    assert [process.returncode for process in processes] == [0] * 4
    assert len(set(outputs)) == 1 and sha256(outputs[0]) == sha256(site.served / "a9a.xz")
    assert site.server.requests == [("a9a.xz", None)]


def test_interrupt_leaves_a_resumable_part(site):
    site.server.script["a9a"] = [("slow", 6.0)]
    target = site.home / "downloads" / "a9a"
    part = target.with_name("a9a.part")
    command = [
        Path(sys.executable).parent / "sparcml-datasets",
        "download",
        "a9a",
        "--data-home",
        site.home,
        "--mirror",
        site.server.url,
        "--catalog",
        site.catalog,
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert stderr == (
        "sparcml-datasets: interrupted; nothing half-written was put in place; the partial "
        f"download {part} resumes on the next run\n"
    )
    assert not target.exists() and 0 < part.stat().st_size < (site.served / "a9a").stat().st_size
    resumed_from = part.stat().st_size
    assert datasets.download("a9a", progress=False, **options(site)) == target
    assert site.server.requests[-1] == ("a9a", f"bytes={resumed_from}-")
    assert sha256(target) == sha256(site.served / "a9a")
    assert sorted(os.listdir(target.parent)) == ["a9a", "a9a.lock"]


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    ("stream", "progress", "shown"),
    [(Terminal, True, True), (Terminal, False, False), (io.StringIO, True, False)],
)
def test_progress_bars_show_only_on_a_terminal(monkeypatch, stream, progress, shown):
    monkeypatch.setattr(sys, "stderr", stream())
    with _download.progress_bar(2048, 0, "a9a.part", progress) as bar:
        bar.update(2048)
    assert ("a9a.part:   0%|" in sys.stderr.getvalue()) == shown
