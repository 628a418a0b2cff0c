"""What a dataset's file may put on the disk: a decompression bomb stops at the rows the
catalogue lists, a cache that cannot fit is not started, a server sending too much is cut."""

import bz2
import shutil

import psutil
import pytest
from datasets_helpers import write_catalog
from httpserver import FileServer

from sparcml_apps.datasets import convert, download
from sparcml_apps.datasets._errors import ContentError, DataHomeError, DownloadError
from sparcml_apps.datasets._limits import cache_bytes

ROWS = b"1 1:1 2:1\n"
BOMB = {"name": "bomb", "task": "binary", "split": "all", "file": "bomb.bz2",
        "compression": "bz2", "n_samples": 10, "n_features": 2, "labels": [-1, 1]}  # fmt: skip


def write_bomb(path, megabytes=400):
    """A bz2 file of a few KB that expands to ``megabytes`` MB of valid rows: the same
    compressed stream of 8 MB of rows, again and again (bz2 reads one after the other)."""
    stream = bz2.compress(ROWS * (8 * 2**20 // len(ROWS)), 9)
    path.write_bytes(stream * (megabytes // 8))
    return path.stat().st_size


def written():
    """Bytes this process has handed to write calls so far (Linux's wchar)."""
    return psutil.Process().io_counters().write_chars


def files_in(home):
    return sorted(p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file())


def test_a_bomb_from_a_mirror_stops_at_the_catalogued_rows(tmp_path):
    served, home = tmp_path / "site", tmp_path / "home"
    served.mkdir()
    size = write_bomb(served / "bomb.bz2")
    assert size < 64_000
    catalog = write_catalog(tmp_path / "c.toml", [BOMB])
    before = written()
    with FileServer(served) as server, pytest.raises(ContentError) as error:
        convert("bomb", data_home=home, mirror=server.url, catalog=catalog, progress=False)
    assert written() - before < size + 2_000_000  # the download and little else
    assert str(error.value).startswith(
        f"{server.url}bomb.bz2: holds more than the 10 rows the catalogue lists for bomb: "
        "stopped at "
    )
    assert "it was deleted and nothing recorded" in str(error.value)
    # nothing half-written: no download, no cache, no record of a checksum (locks only)
    assert [f for f in files_in(home) if not f.endswith(".lock")] == []


def test_a_bomb_on_disk_is_refused_before_its_rows_are_written(tmp_path):
    home = tmp_path / "home"
    (home / "downloads").mkdir(parents=True)
    write_bomb(home / "downloads" / "bomb.bz2")
    catalog = write_catalog(tmp_path / "c.toml", [BOMB])
    before = written()
    with pytest.raises(ContentError, match="holds more than the 10 rows the catalogue lists"):
        convert("bomb", data_home=home, download=False, catalog=catalog, progress=False)
    assert written() - before < 2_000_000
    assert [f for f in files_in(home) if not f.endswith(".lock")] == ["downloads/bomb.bz2"]
    assert not (home / "csr").exists() or not any(p.is_dir() for p in (home / "csr").iterdir())


def test_as_many_rows_as_listed_convert(tmp_path):
    home = tmp_path / "home"
    (home / "downloads").mkdir(parents=True)
    (home / "downloads" / "bomb.bz2").write_bytes(bz2.compress(ROWS * 10))
    catalog = write_catalog(tmp_path / "c.toml", [BOMB | {"nnz": 20}])
    with pytest.warns(UserWarning, match="no published checksum"):
        cache = convert("bomb", data_home=home, download=False, catalog=catalog, progress=False)
    assert (cache / "manifest.json").is_file()


def test_more_nonzeros_than_listed_stop_the_conversion(tmp_path):
    home = tmp_path / "home"
    (home / "downloads").mkdir(parents=True)
    (home / "downloads" / "bomb.bz2").write_bytes(bz2.compress(ROWS * 10))
    catalog = write_catalog(tmp_path / "c.toml", [BOMB | {"nnz": 19}])
    with pytest.raises(ContentError, match="more than the 10 rows and 19 nonzeros"):
        convert("bomb", data_home=home, download=False, catalog=catalog, progress=False)


def test_a_cache_larger_than_the_free_disk_is_not_started(tmp_path):
    home = tmp_path / "home"
    (home / "downloads").mkdir(parents=True)
    (home / "downloads" / "bomb.bz2").write_bytes(bz2.compress(ROWS * 10))
    free = shutil.disk_usage(tmp_path).free
    huge = BOMB | {"n_samples": 10, "n_features": 2**40, "nnz": free // 10}
    catalog = write_catalog(tmp_path / "c.toml", [huge])
    with pytest.raises(DataHomeError) as error:
        convert("bomb", data_home=home, download=False, catalog=catalog, progress=False)
    need = 11 * 8 + 10 * 8 + (free // 10) * 16  # indptr, labels, int64 indices and values
    assert cache_bytes(read_catalog_entry(catalog)) == need > free
    assert str(error.value).startswith(
        f"{home / 'csr'}: the CSR cache of bomb takes {need / 1e6:,.1f} MB (10 rows and "
        f"{free // 10:,} nonzeros, as the catalogue lists); the disk has "
    )
    assert not (home / "csr" / "bomb").exists()


def read_catalog_entry(catalog):
    from sparcml_apps.datasets import read_catalog

    return read_catalog(catalog)["bomb"]


def test_a_server_sending_more_than_the_listed_size_is_cut(tmp_path):
    served, home = tmp_path / "site", tmp_path / "home"
    served.mkdir()
    catalog = write_catalog(tmp_path / "c.toml", [BOMB | {"size": 1000}])
    before = written()
    with FileServer(served) as server:
        server.script["bomb.bz2"] = [("unsized", b"x" * 50_000_000)]
        with pytest.raises(DownloadError) as error:
            download("bomb", data_home=home, mirror=server.url, catalog=catalog, progress=False)
    assert str(error.value) == (
        f"{server.url}bomb.bz2: the server sent more than the 1,000 bytes the catalogue lists"
    )
    assert written() - before < 2_000_000
    assert not (home / "downloads" / "bomb.bz2").exists()
