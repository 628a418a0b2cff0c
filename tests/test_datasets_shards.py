"""Byte-range shards of text files and CSR caches, and the cache itself."""

import errno
import fcntl
import io
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from datasets_helpers import is_mapped, libsvm_dir, sha256, write_catalog, write_variants
from httpserver import FileServer
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from sparcml_apps import datasets
from sparcml_apps.datasets import ParseError, shard
from sparcml_apps.datasets import _cache as cache_module
from sparcml_apps.datasets._cache import read_cache, write_cache
from sparcml_apps.datasets._svmlight import iter_pieces


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """A url-like LIBSVM file with some label-only (empty) rows, and its rows per sklearn."""
    X, y = datasets.make_url_like(1500, n_features=5000, random_state=11)
    X = sp.diags((np.arange(1500) % 97 != 0).astype(float)) @ X  # some empty rows
    X.eliminate_zeros()
    path = tmp_path_factory.mktemp("shards") / "rows.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return path, *load_svmlight_file(str(path), n_features=5000, zero_based=False)


def stack(parts):
    return sp.vstack([X for X, _ in parts], format="csr"), np.concatenate([y for _, y in parts])


@pytest.mark.parametrize("size", range(1, 8))
def test_text_shards_cover_every_row_once_in_order(text_file, size):
    path, X_ref, y_ref = text_file
    parts = [shard(path, rank, size, n_features=5000) for rank in range(size)]
    X, y = stack(parts)
    assert X.shape == X_ref.shape and (X != X_ref).nnz == 0
    np.testing.assert_array_equal(y, y_ref)
    if size > 1:
        assert all(part[0].shape[0] > 0 for part in parts)


@pytest.mark.parametrize("size", range(1, 8))
def test_cache_shards_cover_every_row_once_in_order(text_file, tmp_path, size):
    path, X_ref, y_ref = text_file
    with open(path, "rb") as f:
        write_cache(iter_pieces(f, str(path), n_features=5000), tmp_path / "c", n_features=5000)
    parts = [shard(tmp_path / "c", rank, size) for rank in range(size)]
    X, y = stack(parts)
    assert (X != X_ref).nnz == 0
    np.testing.assert_array_equal(y, y_ref)
    counts = [part[0].nnz + part[0].shape[0] for part in parts]
    assert max(counts) - min(counts) <= 2 * 500  # balanced to within about two rows


@pytest.mark.parametrize("first", ["train", "test"])
def test_the_two_parts_of_a_share_read_the_file_once(text_file, monkeypatch, first):
    from sparcml_apps.datasets import Source, _source

    path = text_file[0]
    X, y = shard(path, 1, 3, n_features=5000)  # the share: the last 30% of it are "test"
    cut = X.shape[0] - round(0.3 * X.shape[0])
    expected = {"train": slice(None, cut), "test": slice(cut, None)}
    reads = []
    monkeypatch.setattr(_source, "shard", lambda *a, **k: reads.append(a) or shard(*a, **k))
    for part in [first, {"train": "test", "test": "train"}[first]]:
        X_part, y_part = Source(str(path), n_features=5000, holdout=0.3, part=part).load(1, 3)
        rows = expected[part]
        assert (X_part != X[rows]).nnz == 0 and np.array_equal(y_part, y[rows])
    assert len(reads) == 1
    assert not _source._cut_off  # taken: nothing held


def test_a_text_shard_reads_only_its_own_rows(tmp_path):
    # lines of 20 bytes; only those starting in the middle third are valid LIBSVM
    lines = 30
    size = 20 * lines
    good, bad = b"1 3:1 7:2.5 12:1.00\n", b"garbage garbage ...\n"
    assert len(good) == len(bad) == 20
    text = b"".join(good if size // 3 <= 20 * k < 2 * size // 3 else bad for k in range(lines))
    path = tmp_path / "mixed.svm"
    path.write_bytes(text)
    X, y = shard(path, 1, 3, n_features=12)
    assert X.shape == (10, 12) and np.all(y == 1)
    with pytest.raises(ParseError, match=r"mixed\.svm, line 1: expected a number"):
        shard(path, 0, 3, n_features=12)
    with pytest.raises(ParseError, match=r"mixed\.svm, line 21: expected a number"):
        shard(path, 2, 3, n_features=12)


@pytest.mark.parametrize("size", [2, 3])
def test_a_parse_error_names_its_line_in_the_file_whatever_rank_reads_it(tmp_path, size):
    lines = [b"%d 1:0.5 %d:1\n" % (k % 2, k % 50 + 2) for k in range(3000)]
    lines[2400] = b"1 7:x\n"
    path = tmp_path / "bad.svm"
    path.write_bytes(b"".join(lines))
    failed = {}
    for rank in range(size):
        try:
            shard(path, rank, size, n_features=60)
        except ParseError as exc:
            failed[rank] = exc
    assert list(failed) == [size - 1]  # the last rank's bytes hold line 2401
    assert (
        str(failed[size - 1]) == f"{path}, line 2401: expected a number after the index, got '7:x'"
    )


def test_shard_arguments_are_checked(text_file, tmp_path):
    path = text_file[0]
    with pytest.raises(ValueError, match="rank must be an integer in \\[0, 3\\); got 3"):
        shard(path, 3, 3, n_features=5000)
    with pytest.raises(ValueError, match="size must be a positive integer; got 0"):
        shard(path, 0, 0, n_features=5000)
    with pytest.raises(ValueError, match="n_features is required to shard the text file"):
        shard(path, 0, 2)
    with pytest.raises(FileNotFoundError, match="nope.svm: expected a file, a CSR cache"):
        shard(tmp_path / "nope.svm", 0, 2)
    packed = write_variants(libsvm_dir() / "a9a.t", tmp_path, "a9a.t")["bz2"]
    with pytest.raises(ValueError, match="bz2-compressed data cannot be split by bytes"):
        shard(packed, 0, 2, n_features=123)


def test_catalogue_names_shard_their_cache(tmp_path, monkeypatch):
    served = tmp_path / "served"
    write_variants(libsvm_dir() / "a9a", served, "a9a")
    catalog = write_catalog(
        tmp_path / "catalog.toml",
        [
            {
                "name": "a9a",
                "task": "binary",
                "split": "train",
                "file": "a9a.xz",
                "compression": "xz",
                "n_samples": 32561,
                "n_features": 123,
                "labels": [-1, 1],
            }
        ],
    )
    X_ref, y_ref = load_svmlight_file(str(served / "a9a"), zero_based=False)
    with FileServer(served) as server:
        monkeypatch.setenv("SPARCML_DATASETS_MIRROR", server.url)
        with pytest.warns(UserWarning, match="recorded sha256"):
            parts = [
                shard("a9a", r, 4, data_home=tmp_path / "home", catalog=catalog) for r in range(4)
            ]
    X, y = stack(parts)
    assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref)
    assert len(server.requests) == 1


def test_cache_round_trip_is_memory_mapped(text_file, tmp_path):
    path, X_ref, y_ref = text_file
    with open(path, "rb") as f:
        manifest = write_cache(
            iter_pieces(f, str(path), n_features=5000),
            tmp_path / "c",
            n_features=5000,
            info={"dataset": "rows"},
        )
    assert manifest["shape"] == [1500, 5000] and manifest["nnz"] == X_ref.nnz
    assert manifest["classes"] == [-1.0, 1.0] and manifest["dataset"] == "rows"
    X, y, _ = read_cache(tmp_path / "c")
    assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref)
    assert X.indices.dtype == X.indptr.dtype == np.int32
    assert all(is_mapped(array) for array in (X.data, X.indices, X.indptr, y))
    X, y, _ = read_cache(tmp_path / "c", rows=(100, 200))
    assert (X != X_ref[100:200]).nnz == 0 and np.array_equal(y, y_ref[100:200])
    assert is_mapped(X.data) and is_mapped(X.indices) and is_mapped(y)


def test_wide_caches_use_int64_indices_and_indptr(text_file, tmp_path, monkeypatch):
    path, X_ref, _ = text_file
    monkeypatch.setattr(cache_module, "INT32_MAX", 1000)  # fewer nonzeros than that fit
    with open(path, "rb") as f:
        write_cache(iter_pieces(f, str(path), n_features=5000), tmp_path / "c", n_features=5000)
    for name in ("indices", "indptr"):
        assert np.load(tmp_path / "c" / f"{name}.npy", mmap_mode="r").dtype == np.int64
    X, _, _ = read_cache(tmp_path / "c")
    assert (X != X_ref).nnz == 0


def test_failed_conversion_keeps_the_old_cache_and_leaves_nothing(text_file, tmp_path):
    path = text_file[0]
    with open(path, "rb") as f:
        write_cache(iter_pieces(f, str(path), n_features=5000), tmp_path / "c", n_features=5000)
    before = {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir()}
    broken = io.BytesIO(path.read_bytes()[:50_000] + b"\n1 x:1\n")
    with pytest.raises(ParseError, match="broken, line"):
        write_cache(iter_pieces(broken, "broken", n_features=5000), tmp_path / "c", n_features=5000)
    assert {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_compressed_files_convert_to_a_cache_that_shards(tmp_path, monkeypatch):
    packed = write_variants(libsvm_dir() / "a9a.t", tmp_path, "a9a.t")["bz2"]
    X_ref, y_ref = load_svmlight_file(str(libsvm_dir() / "a9a.t"), zero_based=False)
    monkeypatch.setattr(cache_module, "MAX_CLASSES", 1)  # two labels are too many to list
    manifest = datasets.convert_svmlight(packed, tmp_path / "cache")
    assert manifest["shape"] == [16281, 122] and manifest["classes"] is None
    assert manifest["source"] == str(packed)
    assert manifest["source_checksum"] == f"sha256:{sha256(packed)}"
    X, y = datasets.load_cache(tmp_path / "cache")
    assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref) and is_mapped(X.indices)
    X, y = stack([shard(tmp_path / "cache", rank, 3) for rank in range(3)])
    assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref)
    with pytest.raises(ValueError, match="n_features must match the cache"):
        shard(tmp_path / "cache", 0, 3, n_features=123)


def refused(fd, offset, nbytes, flags):
    return -1  # as sync_file_range does where the file system refuses it


SYSTEMS = ["direct", "direct refused", "direct refused late", "sync_file_range", "none", "refused"]


@pytest.mark.parametrize("system", SYSTEMS)
def test_cache_written_in_blocks_while_parsing_and_failing_whole(
    text_file, tmp_path, monkeypatch, system
):
    from sparcml_apps.datasets import _cache

    path, X_ref, y_ref = text_file
    fd, direct_here = _cache._create(tmp_path / "probe")
    os.close(fd)
    os.unlink(tmp_path / "probe")
    if system.startswith("direct") and not direct_here:
        pytest.skip(f"the file system of {tmp_path} refuses direct writes")
    monkeypatch.setattr(_cache, "BLOCK_BYTES", 8192)  # every file in several blocks
    writes, starts, syncs = [], [], []
    pwrite, open_, fdatasync = os.pwrite, os.open, os.fdatasync

    def direct(fd):
        return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)

    def recorded_pwrite(fd, data, offset):
        if system == "direct refused late" and direct(fd):
            raise OSError(errno.EINVAL, "Invalid argument")  # a disk of larger sectors
        writes.append((os.readlink(f"/proc/self/fd/{fd}"), offset, len(data), direct(fd)))
        return pwrite(fd, data, offset)

    def refusing_open(file, flags, *args, **kwargs):
        if flags & os.O_DIRECT:  # as a file system without direct writes answers
            raise OSError(errno.EINVAL, "Invalid argument")
        return open_(file, flags, *args, **kwargs)

    real_start = _cache._START_WRITEBACK
    assert real_start is not None  # Linux's C library has sync_file_range
    start = {"sync_file_range": real_start, "none": None, "refused": refused}

    def recorded_start(fd, offset, nbytes, flags):
        starts.append((os.readlink(f"/proc/self/fd/{fd}"), offset, nbytes))
        return start.get(system, real_start)(fd, offset, nbytes, flags)

    monkeypatch.setattr(os, "pwrite", recorded_pwrite)
    if system == "direct refused":
        monkeypatch.setattr(os, "open", refusing_open)
    monkeypatch.setattr(os, "fdatasync", lambda fd: syncs.append(fd) or fdatasync(fd))
    monkeypatch.setattr(_cache, "_START_WRITEBACK", None if system == "none" else recorded_start)
    if system in ("sync_file_range", "none", "refused"):
        monkeypatch.setattr(_cache, "_DIRECT", 0)  # no direct writes offered
    with open(path, "rb") as f:
        pieces = iter_pieces(f, str(path), n_features=5000, chunk_bytes=4096)
        write_cache(pieces, tmp_path / "c", n_features=5000)
    X, y, _ = read_cache(tmp_path / "c")
    assert (X != X_ref).nnz == 0 and X.shape == X_ref.shape
    np.testing.assert_array_equal(y, y_ref)
    blocks = [w for w in writes if w[1] or w[2] > 512]  # (not the headers written last)
    ends = {}  # each file's blocks follow each other
    for file, offset, nbytes, _ in blocks:
        assert offset == ends.get(file, 0)
        ends[file] = offset + nbytes
    names = {Path(file).name for file in ends}
    assert names >= {"indptr.npy", "indices.npy", "data.npy", "labels.npy"}
    assert sum(nbytes == 8192 for _, _, nbytes, _ in blocks) > 20
    if system == "direct":  # past the page cache, whole pages, nothing to sync meanwhile
        assert all(is_direct for *_, is_direct in blocks)
        assert all(nbytes % 4096 == 0 for _, _, nbytes, _ in blocks) and not starts
        assert syncs == []
    else:  # through the page cache: each block starts on its way to the disk, or is synced
        assert not any(is_direct for *_, is_direct in blocks)
        if system == "none":
            assert len(syncs) == len(blocks) and not starts
        else:
            assert len(starts) == len(blocks)
            assert len(syncs) == (len(blocks) if system == "refused" else 0)
    # the disk fills up in the writing thread: the caller gets the error, nothing is left
    write = _cache.NpyWriter._write
    threads = []

    def full(self, block, nbytes, offset):
        threads.append(threading.current_thread().name)
        if len(threads) > 20:
            raise OSError(28, "No space left on device")
        write(self, block, nbytes, offset)

    monkeypatch.setattr(_cache.NpyWriter, "_write", full)
    with open(path, "rb") as f, pytest.raises(OSError, match="No space left on device"):
        pieces = iter_pieces(f, str(path), n_features=5000, chunk_bytes=4096)
        write_cache(pieces, tmp_path / "d", n_features=5000)
    assert threads[20].startswith("cache-writer")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
