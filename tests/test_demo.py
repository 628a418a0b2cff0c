"""The README shows what ``make demo`` prints: every line, the seconds aside."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mpirun import MPI_ENV

README = Path(__file__).resolve().parents[1] / "README.md"
pytestmark = pytest.mark.usefixtures("compiled_kernels")


def readme_demo():
    """The lines of the output block under the README's demo heading."""
    text = README.read_text()
    section = text[text.index("## The demo: `make demo`") :]
    return section.split("```\n", 2)[1].splitlines()


def pattern(line):
    """A regular expression for ``line`` in which the seconds may differ."""
    spans = [m.span() for m in re.finditer(r"\S+", line)]
    if len(spans) >= 7 and line.split()[0].isdigit():  # an epoch's row: its 4th cell
        before, after = spans[2][1], spans[3][1]
    elif found := re.search(r"fit \d+\.\d+ s", line):
        before, after = found.start() + 3, found.end() - 2
    else:
        return re.escape(line)
    return re.escape(line[:before]) + r"\s*\d+\.\d+" + re.escape(line[after:])


def test_the_readme_shows_the_demo_output(tmp_path):
    # a fresh machine: no stored calibration of the cost model
    env = {**os.environ, **MPI_ENV, "SPARCML_CALIBRATION": str(tmp_path / "none.json")}
    done = subprocess.run(
        [sys.executable, "-m", "sparcml_apps.demo"],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown, printed = readme_demo(), done.stdout.splitlines()
    assert len(shown) == len(printed) == 11, (shown, printed)
    for expected, line in zip(shown, printed, strict=True):
        assert re.fullmatch(pattern(expected), line), (expected, line)


def test_the_pattern_holds_all_but_the_seconds():
    row = "            2      1.111474        0.8394          0.07         77.57          77.6  x"
    assert re.fullmatch(pattern(row), row.replace("0.07", "12.34"))
    assert not re.fullmatch(pattern(row), row.replace("1.111474", "1.111475"))
    summary = "test accuracy 0.8588 | fit 11.8 s | sent 387.8 MB, 0.0052% more than"
    assert re.fullmatch(pattern(summary), summary.replace("11.8", "9.1"))
    assert not re.fullmatch(pattern(summary), summary.replace("0.8588", "0.8589"))
