"""The catalogue shipped with the package, and the checks on catalogue files."""

import hashlib
import sys
from importlib import resources
from pathlib import Path

import pytest
from datasets_helpers import write_catalog

from sparcml_apps.datasets import download, read_catalog

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BASE_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"


def test_installed_package_finds_the_catalogue_through_importlib_resources():
    shipped = resources.files("sparcml_apps._catalog").joinpath("catalog.toml")
    assert shipped.is_file()
    # the same bytes as datasets/catalog.toml in the source tree, the one place it is edited
    assert shipped.read_bytes() == (ROOT / "datasets" / "catalog.toml").read_bytes()
    assert resources.files("sparcml_apps._catalog").joinpath("README.md").is_file()
    assert not (ROOT / "datasets" / "__init__.py").exists()  # data, not an importable package


EXPECTED = {
    # name: (file, compression, n_samples, n_features, nnz, labels, checksum)
    "url": ("url_combined.bz2", "bz2", 2396130, 3231961, 277058644, (-1, 1), None),
    "webspam-unigram": ("webspam_wc_normalized_unigram.svm.xz", "xz", 350000, 254, None,
                        (-1, 1), None),
    "webspam-trigram": ("webspam_wc_normalized_trigram.svm.xz", "xz", 350000, 16609143, None,
                        (-1, 1), None),
    "rcv1.binary": ("rcv1_train.binary.bz2", "bz2", 20242, 47236, 1498952, (-1, 1),
                    ("md5", "1aeda848408e621468c0fe6944d9382f")),
    "rcv1.binary.t": ("rcv1_test.binary.bz2", "bz2", 677399, 47236, 49556258, (-1, 1),
                      ("md5", "d6e3ab397758fb5c036d9cced52aedae")),
    "news20.binary": ("news20.binary.bz2", "bz2", 19996, 1355191, None, (-1, 1), None),
    "real-sim": ("real-sim.bz2", "bz2", 72309, 20958, 3709083, (-1, 1), None),
    "kdda": ("kdda.bz2", "bz2", 8407752, 20216830, None, (0, 1), None),
    "kdda.t": ("kdda.t.bz2", "bz2", 510302, 20216830, None, (0, 1), None),
    "kddb": ("kddb.bz2", "bz2", 19264097, 29890095, None, (0, 1), None),
    "kddb.t": ("kddb.t.bz2", "bz2", 748401, 29890095, None, (0, 1), None),
    "kdd12": ("kdd12.xz", "xz", 149639105, 54686452, None, (0, 1), None),
    "kdd12.tr": ("kdd12.tr.xz", "xz", 119705032, 54686452, None, (0, 1), None),
    "kdd12.val": ("kdd12.val.xz", "xz", 29934073, 54686452, None, (0, 1), None),
    "criteo": ("criteo.kaggle2014.svm.tar.xz", "tar.xz", 45840617, 1000000, None, (0, 1), None),
    "criteo.t": ("criteo.kaggle2014.svm.tar.xz", "tar.xz", 6042135, 1000000, None, (0, 1),
                 None),
    "avazu-app": ("avazu-app.bz2", "bz2", 14596137, 1000000, None, (0, 1), None),
    "avazu-app.t": ("avazu-app.t.bz2", "bz2", 1719304, 1000000, None, (0, 1), None),
    "avazu-site": ("avazu-site.bz2", "bz2", 25832830, 1000000, None, (0, 1), None),
    "avazu-site.t": ("avazu-site.t.bz2", "bz2", 2858160, 1000000, None, (0, 1), None),
    "a9a": ("a9a", "none", 32561, 123, 451592, (-1, 1), None),
    "a9a.t": ("a9a.t", "none", 16281, 123, 225731, (-1, 1), None),
    "w8a": ("w8a", "none", 49749, 300, None, (-1, 1), None),
    "w8a.t": ("w8a.t", "none", 14951, 300, None, (-1, 1), None),
    "covtype.binary": ("covtype.libsvm.binary.bz2", "bz2", 581012, 54, None, (1, 2),
                       ("md5", "0d3439b314ce13e2f8b903b12bb3ea20")),
    "epsilon": ("epsilon_normalized.bz2", "bz2", 400000, 2000, 800000000, (-1, 1), None),
    "epsilon.t": ("epsilon_normalized.t.bz2", "bz2", 100000, 2000, 200000000, (-1, 1), None),
}  # fmt: skip


def test_shipped_catalogue_holds_the_benchmarks():
    catalog = read_catalog()
    assert catalog.base_url == BASE_URL
    assert set(EXPECTED) <= set(catalog.datasets)
    for name, (file, compression, rows, columns, nnz, labels, checksum) in EXPECTED.items():
        entry = catalog[name]
        got = (entry.file, entry.compression, entry.n_samples, entry.n_features, entry.nnz,
               entry.labels, entry.checksum)  # fmt: skip
        assert got == (file, compression, rows, columns, nnz, labels, checksum), name
        assert entry.task == "binary" and entry.notes
    assert {catalog["criteo"].member, catalog["criteo.t"].member} == {
        "train.txt.svm",
        "test.txt.svm",
    }


def test_local_copies_checksums_stay_out_of_the_catalogue():
    # the digests of ../shared/data/libsvm are of local copies, not of the site's files
    text = (ROOT / "datasets" / "catalog.toml").read_text()
    local = [hashlib.sha256(name.encode()).hexdigest() for name in ("a9a", "a9a.t")]
    local += ["f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906",
              "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9"]  # fmt: skip
    assert not any(digest in text for digest in local)
    records = tomllib.loads(text)["dataset"]
    assert all(not r.get("checksum", "md5:").startswith("sha256:") for r in records)


GOOD = {"name": "x", "task": "binary", "split": "all", "file": "x.bz2", "compression": "bz2",
        "n_samples": 2, "n_features": 3, "labels": [-1, 1]}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_features": 0}, "'n_features' must be a positive integer; got 0"),
        ({"n_samples": "2"}, "'n_samples' must be a positive integer; got '2'"),
        ({"compression": "zip"}, "'compression' must be one of"),
        ({"labels": []}, "'labels' must be a non-empty list of numbers"),
        ({"checksum": "sha256:abc"}, "'checksum' must be 'sha256:<64 hex digits>'"),
        ({"checksum": "crc:" + "0" * 8}, "'checksum' must be"),
        ({"member": "a"}, "'member' names the file in a tar.xz archive, and only there"),
        ({"colour": "red"}, r"unknown fields \['colour'\]"),
        ({"file": ""}, "'file' must be a non-empty string"),
    ],
)
def test_bad_records_are_named(tmp_path, change, message):
    path = write_catalog(tmp_path / "c.toml", [GOOD | change])
    with pytest.raises(ValueError, match=f"c.toml: dataset #1 \\(x\\): {message}"):
        read_catalog(path)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"file": "../../../tmp/x"}, "file"),
        ({"file": "/etc/passwd"}, "file"),
        ({"file": "sub/x.bz2"}, "file"),
        ({"file": ".."}, "file"),
        ({"file": "x\\..\\y"}, "file"),
        ({"name": "../x"}, "name"),
        ({"name": "a/b"}, "name"),
    ],
)
def test_names_that_leave_the_data_home_are_refused(tmp_path, change, key):
    path = write_catalog(tmp_path / "c.toml", [GOOD | change])
    message = f"'{key}' must be a plain file name, without '/', '\\\\', NUL or '..'"
    with pytest.raises(ValueError, match=message):
        read_catalog(path)
    # nothing is fetched or written with such a catalogue
    home = tmp_path / "home" / "deep"
    with pytest.raises(ValueError, match=f"'{key}' must be a plain file name"):
        download(change.get("name", "x"), data_home=home, catalog=path)
    assert not (tmp_path / "home").exists() and sorted(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("member", ["../x.svm", "/x.svm", "archive/../../x.svm", "a\\b"])
def test_archive_members_above_the_archive_are_refused(tmp_path, member):
    tar = GOOD | {"compression": "tar.xz", "file": "x.tar.xz"}
    path = write_catalog(tmp_path / "c.toml", [tar | {"member": member}])
    with pytest.raises(ValueError, match="'member' must be a relative path in the archive"):
        read_catalog(path)
    path = write_catalog(tmp_path / "c.toml", [tar | {"member": "archive/x.svm"}])
    assert read_catalog(path)["x"].member == "archive/x.svm"


def test_bad_catalogue_files(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("base_url = [")
    with pytest.raises(ValueError, match="c.toml: not a valid TOML file"):
        read_catalog(path)
    write_catalog(path, [GOOD, GOOD])
    with pytest.raises(ValueError, match="dataset name 'x' appears twice"):
        read_catalog(path)
    write_catalog(path, [])
    with pytest.raises(ValueError, match=r"expected \[\[dataset\]\] records; found none"):
        read_catalog(path)
    with pytest.raises(KeyError, match="no dataset 'y' in the catalogue"):
        read_catalog(write_catalog(path, [GOOD]))["y"]
