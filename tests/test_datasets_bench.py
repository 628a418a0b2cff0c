"""The parse benchmark: ``python -m sparcml_apps.bench parse``."""

import json
import subprocess
import sys

import pytest


def run_parse_benchmark(tmp_path, *options):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparcml_apps.bench",
            "parse",
            "--dir",
            tmp_path,
            "--out",
            tmp_path,
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout, json.loads((tmp_path / "parse.json").read_text())


@pytest.mark.bench  # 25 s of fresh processes; the parser itself: test_datasets_parse
def test_quick_parse_benchmark_times_each_parser_in_fresh_processes(tmp_path):
    out, figures = run_parse_benchmark(tmp_path, "--quick")
    files = {f["file"]: f for f in figures["files"]}
    assert {"url-like, 5 decimals", "url-like, float64"} <= set(files)
    for name, f in files.items():
        if name.startswith("url-like"):
            assert f["rows"] == 20_000 and f["nnz"] > 60 * f["rows"]
        else:  # a9a, when the test data holds it
            assert (name, f["rows"], f["nnz"]) == ("a9a", 32_561, 451_592)
        parsers = f["parsers"]
        assert parsers["sparcml"]["identical"] and parsers["sparcml-1"]["identical"]
        assert parsers["sparcml-1"]["threads"] == 1
        assert parsers["svmloader"].get("missing") or parsers["svmloader"]["seconds"] > 0
        # speed is what the full run reports; a quick run is dominated by start-up
        assert parsers["sklearn"]["sparcml_faster"] > 0 and parsers["sklearn"]["seconds"] > 0
    assert "svmloader `load_svmfile`" in out and "sparcml faster" in out
    assert figures["cache"]["load_seconds"] > 0


@pytest.mark.bench
def test_parser_is_faster_than_scikit_learn_on_200_000_url_like_rows(tmp_path):
    out, figures = run_parse_benchmark(tmp_path)
    print(out)
    for f in figures["files"]:
        assert f["parsers"]["sparcml"]["identical"]
        if f["file"].startswith("url-like"):  # a9a's 2 MB: mostly the import, as the page says
            assert f["parsers"]["sklearn"]["sparcml_faster"] >= 2
