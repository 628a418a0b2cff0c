"""Every path option of the command lines is checked before any work: a usage error in
one line that names the option, the path, what was expected and what is there."""

from pathlib import Path

import pytest

from sparcml_apps._paths import readable_file, writable_file, writable_folder
from sparcml_apps.cli import datasets as datasets_cli
from sparcml_apps.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def places(tmp_path):
    """A file, a folder, a path under the file and one that is not there."""
    file = tmp_path / "a-file"
    file.write_text("x\n")
    return {"file": file, "dir": tmp_path, "under": file / "x", "missing": tmp_path / "missing"}


CASES = [
    (["bench", "peers", "--work", "{under}"],
     "argument --work: {under}: {file} is not a directory"),
    (["bench", "peers", "--work", "/proc/x"], "argument --work: /proc/x: cannot write in /proc ("),
    (["bench", "peers", "--data-home", "{file}"],
     "argument --data-home: {file}: expected a directory; it is a file"),
    (["bench", "peers", "--out", "{file}"], "argument --out: {file}: expected a directory; it is"),
    (["bench", "parse", "--dir", "{under}"], "argument --dir: {under}: {file} is not a directory"),
    (["bench", "parse", "--a9a", "{missing}"], "argument --a9a: {missing}: no such file"),
    (["bench", "calibrate", "--path", "{dir}"],
     "argument --path: {dir}: expected a file name; it is a directory"),
    (["bench", "projection", "--calibration", "{missing}"],
     "argument --calibration: {missing}: no such file"),
    (["bench", "projection", "--scaling", "{dir}"],
     "argument --scaling: {dir}: expected a file; it is a directory"),
    (["bench", "scaling", "--datasets", "{missing}"],
     "--datasets {missing}: expected one of url-like, url-like-dense, url-like-flat, a LIBSVM "
     "file or a catalogue name in the data home; it is not a file"),
    (["bench", "train", "--datasets", "{missing}"],
     "--datasets {missing}: {missing}: expected a file, a CSR cache directory or a dataset"),
    (["train", "--dask", "--scheduler-file", "{missing}"],
     "--scheduler-file {missing}: no such file"),
    (["train", "--dask", "--scheduler-file", "{dir}"],
     "--scheduler-file {dir}: expected a file; it is a directory"),
    (["train", "--interface", "lo"], "--interface goes with --dask"),
    (["train", "--insecure"], "--insecure goes with --dask"),
    (["train", "--dask", "--insecure", "--scheduler-file", "{file}"],
     "--insecure does not go with --scheduler-file: the cluster of the file was started"),
    (["train", "--checkpoint", "{under}"], "--checkpoint {under}: {file} is not a directory"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "error"), CASES)
def test_sparcml_path_options_fail_before_any_work(capsys, monkeypatch, places, argv, error):
    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    from sparcml_apps import _mpiexec
    from sparcml_apps.bench import netem, scaling
    from sparcml_apps.cli import train

    for module, function in ((train, "run_spmd"), (train, "run_dask"), (_mpiexec, "run"),
                             (netem, "run_module"), (scaling, "run_cell")):  # fmt: skip
        monkeypatch.setattr(module, function, no_work)
    with pytest.raises(SystemExit) as caught:
        main([part.format(**places) for part in argv])
    assert caught.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].split(": error: ", 1)[1].startswith(error.format(**places)), lines
    assert "Traceback" not in "\n".join(lines)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["list", "--catalog", "{missing}"], "argument --catalog: {missing}: no such file"),
        (["list", "--catalog", "{dir}"],
         "argument --catalog: {dir}: expected a file; it is a directory"),
        (["path", "a9a", "--data-home", "{file}"],
         "argument --data-home: {file}: expected a directory; it is a file"),
    ],
)  # fmt: skip
def test_sparcml_datasets_path_options_fail_before_any_work(capsys, places, argv, error):
    with pytest.raises(SystemExit) as caught:
        datasets_cli.main([part.format(**places) for part in argv])
    assert caught.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.split(": error: ", 1)[1] == error.format(**places)


def test_help_states_the_real_data_home(capsys):
    for argv in (["bench", "peers", "--help"], ["train", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert "(default: $SPARCML_DATA_HOME, else ~/sparcml_data)" in text
    with pytest.raises(SystemExit):
        datasets_cli.main(["list", "--help"])
    assert "else ~/sparcml_data)" in " ".join(capsys.readouterr().out.split())


def test_the_checks_against_the_file_system(places):
    assert writable_folder(places["missing"] / "deeper") == places["missing"] / "deeper"
    assert writable_file(places["missing"] / "m.json").name == "m.json"
    assert readable_file(places["file"]) == places["file"]
    with pytest.raises(ValueError, match="is not a directory"):
        writable_file(places["under"] / "m.json")
