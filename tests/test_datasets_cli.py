"""The sparcml-datasets command line."""

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from datasets_helpers import libsvm_dir, sha256, write_catalog, write_variants
from httpserver import FileServer

from sparcml_apps.cli.datasets import build_parser, main
from sparcml_apps.datasets import read_catalog

SCRIPT = Path(sys.executable).parent / "sparcml-datasets"
A9A = {"task": "binary", "split": "train", "n_samples": 32561, "n_features": 123, "labels": [-1, 1]}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    paths = write_variants(libsvm_dir() / "a9a", folder, "a9a")
    catalog = write_catalog(
        folder.parent / "cli-catalog.toml",
        [
            {
                "name": "a9a",
                "file": "a9a.xz",
                "compression": "xz",
                **A9A,
                "checksum": f"sha256:{sha256(paths['xz'])}",
            },
            {"name": "a9a-plain", "file": "a9a", "compression": "none", **A9A},
            {
                "name": "wrong",
                "file": "a9a.bz2",
                "compression": "bz2",
                **A9A,
                "checksum": "md5:" + "0" * 32,
            },
        ],
    )
    with FileServer(folder) as server:
        yield server, catalog


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_catalogue_entry(capsys, tmp_path):
    code, out, _ = run(capsys, "list", "--data-home", tmp_path)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["name", "shape", "nnz", "size", "cached"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == list(read_catalog().datasets)
    url = lines[1 + names.index("url")].split()
    assert url == ["url", "2,396,130", "x", "3,231,961", "277,058,644", "?", "-"]


EXPECTED = {
    "list": ["--data-home", "--catalog"],
    "info": ["--data-home", "--catalog", "NAME"],
    "download": ["--data-home", "--catalog", "--mirror", "--force", "--quiet", "NAME"],
    "verify": ["--data-home", "--catalog", "--quiet", "NAME"],
    "forget": ["--data-home", "--catalog", "NAME"],
    "convert": [
        "--data-home",
        "--catalog",
        "--mirror",
        "--force",
        "--quiet",
        "--no-download",
        "NAME",
    ],
    "path": ["--data-home", "--catalog", "--cache", "NAME"],
}


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_help_of_each_subcommand_is_complete(capsys):
    assert set(subcommands()) == set(EXPECTED)
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    top = capsys.readouterr().out
    assert caught.value.code == 0 and all(name in top for name in EXPECTED)
    for name, sub in subcommands().items():
        with pytest.raises(SystemExit) as caught:
            main([name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert caught.value.code == 0
        assert sub.description in text
        for option in EXPECTED[name]:
            assert option in text, (name, option)
        for action in sub._actions:
            if action.option_strings and action.dest != "help":
                # every option says what happens without it
                assert "(default: " in action.help, (name, action.dest)
                assert " ".join(action.help.split()) in text
            elif not action.option_strings:
                assert action.help and action.help in text
    download = " ".join(subcommands()["download"].format_help().split())
    assert "$SPARCML_DATA_HOME, else ~/sparcml_data" in download
    assert "$SPARCML_DATASETS_MIRROR, else the LIBSVM site" in download


def test_download_verify_convert_path_info(capsys, tmp_path, served):
    server, catalog = served
    common = ["--data-home", tmp_path, "--catalog", catalog]
    code, out, err = run(capsys, "download", "a9a", "--mirror", server.url, "--quiet", *common)
    target = tmp_path / "downloads" / "a9a.xz"
    assert (code, out, err) == (0, f"{target}\n", "")
    assert sha256(target) == sha256(server.root / "a9a.xz")
    code, out, err = run(capsys, "verify", "a9a", *common)  # no bar: stderr is no terminal
    assert (code, out, err) == (0, f"a9a: sha256:{sha256(target)} ok\n", "")
    code, out, _ = run(capsys, "convert", "a9a", "--no-download", "--quiet", *common)
    cache = tmp_path / "csr" / "a9a"
    assert (code, out) == (0, f"{cache}\n") and (cache / "manifest.json").is_file()
    assert run(capsys, "path", "a9a", *common)[1] == f"{target}\n"
    assert run(capsys, "path", "a9a", "--cache", *common)[1] == f"{cache}\n"
    code, out, _ = run(capsys, "list", *common)
    assert out.splitlines()[1].split() == [
        "a9a",
        "32,561",
        "x",
        "123",
        "?",
        *f"{target.stat().st_size / 1e3:.1f} KB".split(),  # a9a.xz: 150-odd KB
        "csr",
    ]
    assert out.splitlines()[2].split()[-1] == "-"
    code, out, _ = run(capsys, "info", "a9a", *common)
    assert code == 0
    assert f"checksum:    sha256:{sha256(target)}" in out and f"cache:       {cache}\n" in out


def test_convert_downloads_when_needed_and_warns_of_a_recorded_checksum(capsys, tmp_path, served):
    server, catalog = served
    common = ["--data-home", tmp_path, "--catalog", catalog, "--mirror", server.url, "--quiet"]
    code, out, err = run(capsys, "convert", "a9a-plain", *common)
    assert code == 0 and out == f"{tmp_path / 'csr' / 'a9a-plain'}\n"
    assert err.startswith("sparcml-datasets: warning: a9a has no published checksum: recorded")
    assert sha256(server.root / "a9a") in (tmp_path / "checksums.json").read_text()


def test_checksum_mismatch_exits_non_zero_and_leaves_no_file(capsys, tmp_path, served):
    server, catalog = served
    code, out, err = run(
        capsys,
        "download",
        "wrong",
        "--mirror",
        server.url,
        "--data-home",
        tmp_path,
        "--catalog",
        catalog,
    )
    received = hashlib.md5((server.root / "a9a.bz2").read_bytes()).hexdigest()
    assert code == 1 and out == ""
    assert err == (
        f"sparcml-datasets: error: {server.url}a9a.bz2: md5 mismatch: expected {'0' * 32} "
        f"(published in the catalogue {catalog}), received {received}\n"
    )
    assert sorted(p.name for p in (tmp_path / "downloads").iterdir()) == ["a9a.bz2.lock"]


def test_errors_name_the_input(capsys, tmp_path, served):
    _, catalog = served
    code, _, err = run(capsys, "info", "nope", "--catalog", catalog)
    assert code == 1 and err.startswith("sparcml-datasets: error: no dataset 'nope' in the")
    code, _, err = run(
        capsys, "convert", "a9a", "--no-download", "--data-home", tmp_path, "--catalog", catalog
    )
    assert code == 1 and "is not downloaded; run `sparcml-datasets download a9a`" in err
    code, _, err = run(capsys, "verify", "a9a", "--data-home", tmp_path, "--catalog", catalog)
    assert code == 1 and "is not downloaded" in err


def test_console_script_is_installed(served):
    _, catalog = served
    result = subprocess.run(
        [SCRIPT, "list", "--catalog", catalog], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == [
        "a9a",
        "a9a-plain",
        "wrong",
    ]
