"""The data home: files on disk verified, checksums recorded only for good files and
forgotten on demand, read-only homes, the modes of what is written, clear errors."""

import bz2
import errno
import hashlib
import json
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
from datasets_helpers import libsvm_dir, sha256, write_catalog
from httpserver import FileServer
from sklearn.datasets import load_svmlight_file

from sparcml_apps import datasets
from sparcml_apps.cli.datasets import main
from sparcml_apps.datasets import (
    ChecksumError,
    ContentError,
    DataHomeError,
    _download,
    _stages,
)

BIN = Path(sys.executable).parent
A9A = {"task": "binary", "split": "train", "n_samples": 32561, "n_features": 123, "labels": [-1, 1]}
HTML = b"<!DOCTYPE html>\n<html><body>Not here.</body></html>\n"


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("packed")
    (folder / "a9a.bz2").write_bytes(bz2.compress((libsvm_dir() / "a9a").read_bytes()))
    return folder / "a9a.bz2"


@pytest.fixture
def site(packed, tmp_path, monkeypatch):
    """``pub`` (sha256 in the catalogue) and ``unpub`` (rows and nonzeros only), both
    a9a.bz2, served locally; an empty data home."""
    monkeypatch.setattr(_download, "BACKOFF", 0.01)
    monkeypatch.delenv("SPARCML_DATASETS_MIRROR", raising=False)
    monkeypatch.delenv("SPARCML_DATA_HOME", raising=False)
    served = tmp_path / "served"
    served.mkdir()
    for file in ("pub.bz2", "unpub.bz2"):
        shutil.copy(packed, served / file)
    records = [
        {"name": "pub", "file": "pub.bz2", "compression": "bz2", **A9A},
        {"name": "unpub", "file": "unpub.bz2", "compression": "bz2", **A9A, "nnz": 451592},
    ]
    records[0]["checksum"] = f"sha256:{sha256(packed)}"
    with FileServer(served) as server:
        yield SimpleNamespace(
            server=server,
            served=served,
            sha=sha256(packed),
            home=tmp_path / "home",
            catalog=write_catalog(tmp_path / "catalog.toml", records),
        )


def options(site, mirror=True):
    found = {"data_home": site.home, "catalog": site.catalog, "progress": False}
    return {**found, "mirror": site.server.url} if mirror else found


def cli(capsys, site, *argv, mirror=True):
    common = ["--data-home", site.home, "--catalog", site.catalog]
    extra = ["--mirror", site.server.url, "--quiet"] if mirror else []
    code = main([str(arg) for arg in [*argv, *common, *extra]])
    out, err = capsys.readouterr()
    return code, out, err


def entries(site):
    path = site.home / "checksums.json"
    return json.loads(path.read_text()) if path.exists() else {}


# a first download is recorded only if it is the dataset


def test_an_html_page_is_refused_with_what_it_holds_and_nothing_recorded(site):
    site.server.script["unpub.bz2"] = [("body", HTML)]
    with pytest.raises(ContentError) as caught:
        datasets.download("unpub", **options(site))
    assert str(caught.value).startswith(
        f"{site.server.url}unpub.bz2: expected bz2 data; the file is not compressed: it "
        f"begins {HTML[:48]!r}; with no published checksum, a download is kept only if it "
        "parses as the catalogue describes it: it was deleted and nothing recorded"
    )
    assert entries(site) == {} and not (site.home / "downloads" / "unpub.bz2").exists()
    # the real file then downloads, and is recorded
    with pytest.warns(UserWarning, match=f"recorded sha256 {site.sha}"):
        target = datasets.download("unpub", **options(site))
    assert sha256(target) == site.sha and entries(site)["unpub.bz2"]["sha256"] == site.sha


def test_an_html_page_against_a_published_checksum_is_named(site):
    site.server.script["pub.bz2"] = [("body", HTML)]
    with pytest.raises(ChecksumError) as caught:
        datasets.download("pub", **options(site))
    assert str(caught.value).endswith(
        f"received {hashlib.sha256(HTML).hexdigest()}; the server sent an HTML page, not the file"
    )


def test_a_file_of_other_rows_or_nonzeros_is_not_recorded(site):
    lines = (libsvm_dir() / "a9a").read_bytes().splitlines(keepends=True)
    for wrong in (lines[:-1], lines[:-1] + [b"-1 3:1\n"]):  # a row short; nonzeros short
        holds = f"{len(wrong)} rows and {sum(line.count(b':') for line in wrong)} nonzeros"
        site.server.script["unpub.bz2"] = [("body", bz2.compress(b"".join(wrong)))]
        with pytest.raises(ContentError, match="nothing recorded") as caught:
            datasets.download("unpub", **options(site))
        assert (
            f"unpub.bz2: the catalogue lists 32561 rows and 451592 nonzeros; the file holds "
            f"{holds}" in str(caught.value)
        )
        assert entries(site) == {}


def test_a_wrong_record_is_named_and_forgotten(capsys, site):
    """A data home where an earlier download recorded an HTML page's sha256 (as versions
    that trusted any first download did): the message says where the expected digest comes
    from and how to forget it; `forget` does, and the real file then downloads."""
    downloads = site.home / "downloads"
    downloads.mkdir(parents=True)
    (downloads / "unpub.bz2").write_bytes(HTML)
    wrong = hashlib.sha256(HTML).hexdigest()
    (site.home / "checksums.json").write_text(
        json.dumps({"unpub.bz2": {"sha256": wrong, "url": "http://example.org/unpub.bz2"}})
    )
    code, out, err = cli(capsys, site, "download", "unpub", "--force")
    assert code == 1 and out == ""
    assert err == (
        f"sparcml-datasets: error: {site.server.url}unpub.bz2: sha256 mismatch: expected {wrong} "
        f"(recorded at its first download in {site.home / 'checksums.json'}; `sparcml-datasets "
        f"forget unpub` forgets it), received {site.sha}\n"
    )
    code, out, _ = cli(capsys, site, "info", "unpub", mirror=False)
    assert f"recorded sha256:{wrong} in {site.home / 'checksums.json'}" in out
    code, out, _ = cli(capsys, site, "forget", "unpub", "pub", mirror=False)
    assert code == 0 and out == (
        f"unpub: forgot sha256 {wrong} (recorded from http://example.org/unpub.bz2); the next "
        "download is checked by parsing it and recorded anew\n"
        "pub: nothing recorded; its checksum is published in the catalogue\n"
    )
    assert entries(site) == {}
    # the HTML page still on disk is no dataset: a plain download says so
    code, _, err = cli(capsys, site, "download", "unpub")
    assert code == 1 and "the file is not compressed: it begins b'<!DOCTYPE html>" in err
    assert err.rstrip().endswith("`sparcml-datasets download unpub --force` fetches it again")
    code, out, err = cli(capsys, site, "download", "unpub", "--force")
    assert code == 0 and out == f"{downloads / 'unpub.bz2'}\n"
    assert f"recorded sha256 {site.sha}" in err and sha256(downloads / "unpub.bz2") == site.sha
    assert entries(site)["unpub.bz2"]["sha256"] == site.sha


def test_load_parses_a_first_download_once(site, monkeypatch):
    """Without a published checksum, the check of the download is its conversion."""
    parses = []
    real = _stages.iter_pieces

    def counted(*args, **kwargs):
        parses.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(_stages, "iter_pieces", counted)
    with pytest.warns(UserWarning, match=f"recorded sha256 {site.sha}"):
        X, y = datasets.load("unpub", **options(site))
    X_ref, y_ref = load_svmlight_file(str(libsvm_dir() / "a9a"), zero_based=False)
    assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref)
    assert parses == [f"{site.server.url}unpub.bz2"]
    manifest = json.loads((site.home / "csr" / "unpub" / "manifest.json").read_text())
    assert manifest["source_checksum"] == f"sha256:{site.sha}"
    assert entries(site)["unpub.bz2"] == {"sha256": site.sha, "url": parses[0]}
    assert sha256(site.home / "downloads" / "unpub.bz2") == site.sha
    # a bad first download through load is refused all the same, leaving no cache
    site.server.script["pub.bz2"] = [("body", HTML)]
    with pytest.raises(ChecksumError, match="the server sent an HTML page"):
        datasets.load("pub", **options(site))
    assert not (site.home / "csr" / "pub").exists()


def test_a_download_that_cannot_be_converted_for_want_of_room_is_kept(site, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    write_cache = _stages.write_cache
    monkeypatch.setattr(_stages, "write_cache", full)
    with pytest.raises(OSError, match="No space left on device"):
        datasets.load("unpub", **options(site))
    part = site.home / "downloads" / "unpub.bz2.part"
    assert sha256(part) == site.sha and entries(site) == {}
    size = part.stat().st_size
    monkeypatch.setattr(_stages, "write_cache", write_cache)
    with pytest.warns(UserWarning, match="recorded"):
        datasets.load("unpub", **options(site))
    assert site.server.requests[1:] == [("unpub.bz2", f"bytes={size}-")]  # nothing more
    assert not part.exists() and entries(site)["unpub.bz2"]["sha256"] == site.sha


# a file on disk is verified; a cache records what it was made from


@pytest.mark.filterwarnings("ignore:unpub.bz2 has no published checksum")
@pytest.mark.parametrize("name", ["pub", "unpub"])
def test_a_changed_file_on_disk_is_refused_by_download_and_convert(site, name):
    target = datasets.download(name, **options(site))
    cache = datasets.convert(name, **options(site))
    made = (cache / "data.npy").stat().st_mtime_ns
    with open(target, "ab") as f:
        f.write(bz2.compress(b"+1 1:1\n"))  # a valid extra stream: one more row
    changed = sha256(target)
    for call in (datasets.download, datasets.convert):
        extra = {"force": True} if call is datasets.convert else {}
        with pytest.raises(ChecksumError) as caught:
            call(name, **options(site), **extra)
        message = str(caught.value)
        assert message.startswith(f"{target}: sha256 mismatch: expected {site.sha} (")
        assert f"received {changed}; " in message
        assert message.endswith(f"`sparcml-datasets download {name} --force` fetches it again")
    assert (cache / "data.npy").stat().st_mtime_ns == made  # the cache made before stays
    datasets.download(name, force=True, **options(site))
    cache = datasets.convert(name, force=True, **options(site))
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["source_checksum"] == f"sha256:{site.sha}"


def test_a_file_put_in_place_by_hand_is_parsed_before_it_is_recorded(site):
    downloads = site.home / "downloads"
    downloads.mkdir(parents=True)
    (downloads / "unpub.bz2").write_bytes(bz2.compress(b"+1 1:1\n"))
    with pytest.raises(ContentError, match="the catalogue lists 32561 rows"):
        datasets.verify("unpub", **options(site, mirror=False))
    with pytest.raises(ContentError, match="the catalogue lists 32561 rows"):
        datasets.convert("unpub", **options(site))
    assert entries(site) == {} and not (site.home / "csr" / "unpub").exists()
    shutil.copy(site.served / "unpub.bz2", downloads / "unpub.bz2")
    with pytest.warns(UserWarning, match=f"recorded sha256 {site.sha}"):
        cache = datasets.convert("unpub", **options(site))
    assert json.loads((cache / "manifest.json").read_text())["source_checksum"] == (
        f"sha256:{site.sha}"
    )
    assert len(site.server.requests) == 0


@pytest.mark.filterwarnings("ignore:unpub.bz2 has no published checksum")
def test_a_cache_of_another_file_is_made_again(site):
    """After `forget` and a new download of a changed file, the cache follows the file."""
    X, y = datasets.load("unpub", **options(site))
    assert y[0] == -1
    lines = (libsvm_dir() / "a9a").read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b"-1 ", b"+1 ", 1)  # the same rows and nonzeros
    (site.served / "unpub.bz2").write_bytes(bz2.compress(b"".join(lines)))
    datasets.forget("unpub", data_home=site.home, catalog=site.catalog)
    datasets.download("unpub", force=True, **options(site))
    X, y = datasets.load("unpub", **options(site))
    assert y[0] == 1


def test_convert_svmlight_records_the_bytes_it_read(tmp_path):
    path = tmp_path / "a9a.bz2"
    path.write_bytes(bz2.compress((libsvm_dir() / "a9a").read_bytes()))
    manifest = datasets.convert_svmlight(path, tmp_path / "cache", n_features=123)
    assert manifest["source_checksum"] == f"sha256:{sha256(path)}"


def test_convert_svmlight_by_threads_writes_the_same_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets._svmlight, "THREAD_BYTES", 4096)  # a9a's block: 3 parts
    path = libsvm_dir() / "a9a"
    X_ref, y_ref = load_svmlight_file(str(path), n_features=123, zero_based=False)
    for threads in (1, 3):
        cache = tmp_path / f"by-{threads}"
        manifest = datasets.convert_svmlight(path, cache, n_features=123, threads=threads)
        X, y = datasets.load_cache(cache)
        assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref)
        assert manifest["source_checksum"] == f"sha256:{sha256(path)}"
        assert manifest["shape"] == [32_561, 123] and manifest["nnz"] == X_ref.nnz


# read-only data homes


def read_only(home, *command):
    """Run ``command`` where ``home`` is a read-only bind mount (a private mount namespace:
    root ignores permission bits, not a read-only mount)."""
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', home]
        + [str(arg) for arg in command],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def can_mount_read_only(tmp_path):
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        done = read_only(probe, "touch", probe / "x")
    except (FileNotFoundError, subprocess.TimeoutExpired):
        pytest.skip("no unshare here: cannot make a read-only mount")
    if "Read-only file system" not in done.stderr:
        pytest.skip(f"cannot make a read-only mount here: {done.stderr.strip()}")


READ_ONLY_RUN = """
import contextlib, io, json, sys
from sparcml_apps import datasets
from sparcml_apps.cli.datasets import main
name, home, catalog = sys.argv[1:4]
X, y = datasets.load(name, data_home=home, catalog=catalog, progress=False)
X2, _ = datasets.shard(name, 1, 2, data_home=home, catalog=catalog)
runs = []
for argv in json.loads(sys.argv[4]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv + ["--data-home", home, "--catalog", catalog])
    runs.append([argv, code, err.getvalue()])
print(json.dumps({"shape": [X.shape[0], X.nnz, X2.shape[0]], "runs": runs}))
"""


@pytest.mark.parametrize("name", ["pub", "unpub"])
def test_a_read_only_home_serves_what_it_holds(site, can_mount_read_only, name):
    with pytest.warns(UserWarning) if name == "unpub" else _quiet():
        datasets.convert(name, **options(site))
    before = sorted(p.relative_to(site.home) for p in site.home.rglob("*"))
    reads = [["download", name], ["convert", name], ["verify", name], ["list"]]
    writes = [["download", name, "--force"], ["convert", name, "--force"]]
    argv = json.dumps([[*a, "--quiet"] if a[0] != "list" else a for a in reads + writes])
    done = read_only(
        site.home, sys.executable, "-c", READ_ONLY_RUN, name, site.home, site.catalog, argv
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    X_ref, _ = load_svmlight_file(str(libsvm_dir() / "a9a"), zero_based=False)
    rows, nnz, half = found["shape"]
    assert (rows, nnz) == (X_ref.shape[0], X_ref.nnz) and 0 < half < rows
    for command, code, err in found["runs"][: len(reads)]:
        assert (code, err) == (0, ""), command
    # writing is refused, with a message that says so, and nothing is lost
    for command, code, err in found["runs"][len(reads) :]:
        assert code == 1, command
        assert err.startswith(
            f"sparcml-datasets: error: cannot write in the data home {site.home} (Read-only "
            "file system: "
        ), err
        assert "give a writable one with --data-home or $SPARCML_DATA_HOME" in err
    assert sorted(p.relative_to(site.home) for p in site.home.rglob("*")) == before


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# modes


@pytest.mark.parametrize(
    ("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)]
)
def test_what_is_written_follows_the_umask(site, umask, file_mode, dir_mode):
    old = os.umask(umask)
    try:
        with pytest.warns(UserWarning, match="recorded"):
            cache = datasets.convert("unpub", **options(site))
    finally:
        os.umask(old)
    modes = {
        path: path.stat().st_mode & 0o777
        for path in [site.home / "checksums.json", site.home / "downloads" / "unpub.bz2"]
        + [cache, *cache.iterdir()]
    }
    expected = {path: dir_mode if path.is_dir() else file_mode for path in modes}
    assert modes == expected


# errors


def test_a_mirror_that_is_no_http_url_fails_at_once(capsys, site, monkeypatch):
    for mirror in ("localhost:9", "ftp://127.0.0.1/libsvm", "/srv/libsvm"):
        begin = time.monotonic()
        with pytest.raises(SystemExit) as caught:
            main(["download", "unpub", "--mirror", mirror, "--data-home", str(site.home)])
        err = capsys.readouterr().err
        assert caught.value.code == 2 and err.startswith("usage: sparcml-datasets download")
        assert f"error: --mirror must be an http:// or https:// URL; got {mirror!r}" in err
        with pytest.raises(
            ValueError, match=f"mirror must be an http:// or https:// URL; got {mirror!r}"
        ):
            datasets.download("unpub", **{**options(site), "mirror": mirror})
        monkeypatch.setenv("SPARCML_DATASETS_MIRROR", mirror)
        with pytest.raises(ValueError, match=r"^\$SPARCML_DATASETS_MIRROR must be an http://"):
            datasets.download("unpub", **options(site, mirror=False))
        monkeypatch.delenv("SPARCML_DATASETS_MIRROR")
        assert time.monotonic() - begin < 5
    assert site.server.requests == [] and not site.home.exists()


def test_a_data_home_that_cannot_be_written_is_named(capsys, site, tmp_path):
    home = tmp_path / "a-file" / "home"
    home.parent.write_text("not a folder\n")
    code, out, err = cli(
        capsys,
        SimpleNamespace(home=home, catalog=site.catalog, server=site.server),
        "download",
        "pub",
    )
    assert code == 1 and out == ""
    assert err == (
        f"sparcml-datasets: error: cannot write in the data home {home} (Not a directory: "
        f"{home / 'downloads'}); give a writable one with --data-home or $SPARCML_DATA_HOME "
        "(reading a file and a CSR cache already there needs no write access)\n"
    )
    with pytest.raises(DataHomeError):
        datasets.convert("pub", **{**options(site), "data_home": home})
    # a file given as the data home is refused before any work, named as an option
    with pytest.raises(SystemExit) as caught:
        cli(capsys, SimpleNamespace(home=home.parent, catalog=site.catalog, server=site.server),
            "download", "pub")  # fmt: skip
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"sparcml-datasets download: error: argument --data-home: {home.parent}: expected a "
        "directory; it is a file\n"
    )


def test_an_interrupted_conversion_says_what_it_left(capsys, site, monkeypatch):
    datasets.download("pub", **options(site))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_stages, "write_cache", interrupted)
    code, out, err = cli(capsys, site, "convert", "pub")
    assert code == 130 and out == ""
    assert err == "sparcml-datasets: interrupted; nothing half-written was put in place\n"
    assert not (site.home / "csr" / "pub").exists()


def test_ctrl_c_during_a_forced_download_keeps_the_good_file(site):
    target = datasets.download("pub", **options(site))
    stamp = target.stat().st_mtime_ns
    site.server.script["pub.bz2"] = [("slow", 6.0)]
    part = target.with_name("pub.bz2.part")
    command = [BIN / "sparcml-datasets", "download", "pub", "--force", "--mirror", site.server.url]
    command += ["--data-home", site.home, "--catalog", site.catalog]
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
    assert stderr.endswith(f"the partial download {part} resumes on the next run\n")
    assert sha256(target) == site.sha and target.stat().st_mtime_ns == stamp
    assert 0 < part.stat().st_size < target.stat().st_size
    X, _ = datasets.load("pub", **options(site))
    assert np.asarray(X.sum()) > 0
