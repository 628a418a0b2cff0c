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


def test_quick_parse_benchmark_reports_both_parsers_and_the_cache(tmp_path):
    out, figures = run_parse_benchmark(tmp_path, "--quick")
    assert figures["identical"] is True and figures["megabytes"] >= 20
    assert figures["rows"] > 15_000 and figures["nnz"] > 100 * figures["rows"]
    for label in (
        "sparcml `load_svmlight`",
        "scikit-learn `load_svmlight_file`",
        "speedup",
        "cache conversion",
        "cache load (memory map)",
    ):
        assert label in out
    assert (tmp_path / "cache" / "manifest.json").is_file()


@pytest.mark.bench
def test_parser_is_at_least_twice_as_fast_as_scikit_learn_on_200_megabytes(tmp_path):
    out, figures = run_parse_benchmark(tmp_path)
    print(out)
    assert figures["megabytes"] >= 200 and figures["identical"] is True
    assert figures["speedup"] >= 2
