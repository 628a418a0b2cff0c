"""Checkpoints in one process: round trip, atomic writes, damage found and passed over."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mpi4py import MPI

from sparcml_apps.training import checkpoint
from sparcml_apps.training.checkpoint import CheckpointWarning, check_compatible, latest, save

SELF = MPI.COMM_SELF


def state(number):
    """Arrays of several dtypes and shapes whose values tell the checkpoint apart."""
    rng = np.random.default_rng(number)
    return {
        "weights": rng.standard_normal(1000),
        "residual": rng.standard_normal((3, 7)).astype(np.float32),
        "order": rng.permutation(50).astype(np.uint32),
        "t": np.array(number * 1.5),
        "empty": np.zeros(0, np.int64),
    }


def assert_state(found, number):
    expected = state(number)
    assert found.keys() == expected.keys()
    for name, array in expected.items():
        assert found[name].dtype == array.dtype and found[name].shape == array.shape, name
        np.testing.assert_array_equal(found[name], array, err_msg=name)


def save_numbered(directory, count):
    for number in range(1, count + 1):
        save(directory, state(number), {"epoch": number, "options": {"batch_size": 16}}, SELF)


def test_the_newest_checkpoint_comes_back_whole_and_two_are_kept(tmp_path):
    save_numbered(tmp_path, 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-000003", "checkpoint-000004"]
    found = latest(tmp_path, SELF)
    assert found.number == 4 and found.path == tmp_path / "checkpoint-000004"
    assert_state(found.arrays, 4)
    assert found.metadata == {"epoch": 4, "options": {"batch_size": 16}}
    assert found.skipped == []
    assert not [p for p in tmp_path.rglob(".*")]  # no temporary file left


def test_keep_sets_how_many_complete_checkpoints_remain(tmp_path):
    for _ in range(4):
        save(tmp_path, state(0), comm=SELF, keep=3)
    assert len(list(tmp_path.iterdir())) == 3
    save(tmp_path, state(0), comm=SELF, keep=1)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-000005"]


def test_no_checkpoint_yet(tmp_path):
    assert latest(tmp_path / "absent", SELF) is None
    assert latest(tmp_path, SELF) is None


@pytest.mark.parametrize(
    "arrays, metadata, keep, message",
    [
        ([np.zeros(3)], None, 2, "arrays must be a dict of names to numpy arrays"),
        ({"w": [1.0, 2.0]}, None, 2, r"arrays\['w'\] must be a numpy array of numbers; got list"),
        ({"w": np.array([None])}, None, 2, r"arrays\['w'\] must be .* got object"),
        ({"__metadata__": np.zeros(1)}, None, 2, "names must be strings but"),
        ({"w": np.zeros(1)}, {"rng": np.zeros(1)}, 2, "metadata must be a dict that JSON can"),
        ({"w": np.zeros(1)}, {"loss": float("nan")}, 2, "metadata must be a dict that JSON can"),
        ({"w": np.zeros(1)}, None, 0, "keep must be an int of at least 1; got 0"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, arrays, metadata, keep, message):
    with pytest.raises((TypeError, ValueError), match=message):
        save(tmp_path / "run", arrays, metadata, SELF, keep=keep)
    assert not (tmp_path / "run").exists()


def test_a_failure_between_write_and_rename_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    save_numbered(tmp_path, 2)

    def fail(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        save(tmp_path, state(3), comm=SELF)
    monkeypatch.undo()
    assert not [p for p in tmp_path.rglob(".*")]  # the temporary part is gone
    with pytest.warns(CheckpointWarning, match="checkpoint-000003: incomplete"):
        found = latest(tmp_path, SELF)
    assert found.number == 2
    assert_state(found.arrays, 2)


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from mpi4py import MPI
    from sparcml_apps.training.checkpoint import save

    directory, call, when = sys.argv[1], sys.argv[2], int(sys.argv[3])
    save(directory, {"w": np.arange(10.0)}, {"epoch": 1}, MPI.COMM_SELF)
    real, calls = getattr(os, call), []

    def killing(*args):
        calls.append(args)
        if len(calls) == when:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args)

    setattr(os, call, killing)
    save(directory, {"w": np.arange(10.0) + 1}, {"epoch": 2}, MPI.COMM_SELF)
    """
)


@pytest.mark.parametrize(
    "call, when, left",
    [
        ("fsync", 2, {".rank-0.npz."}),  # the part written, not yet on disk (1: the folder)
        ("replace", 1, {".rank-0.npz."}),  # the part on disk, not yet renamed
        ("fsync", 4, {"rank-0.npz", ".COMPLETE."}),  # the manifest written, not on disk
        ("replace", 2, {"rank-0.npz", ".COMPLETE."}),  # the manifest not yet renamed
    ],
)
def test_a_process_killed_while_saving_leaves_the_previous_checkpoint(tmp_path, call, when, left):
    process = subprocess.run(
        [sys.executable, "-c", KILLED, str(tmp_path), call, str(when)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert process.returncode == -signal.SIGKILL, process.stderr
    killed = tmp_path / "checkpoint-000002"
    # temporary files by their prefix (mkstemp's random suffix holds no dot)
    names = {n[: n.rindex(".") + 1] if n.startswith(".") else n for n in os.listdir(killed)}
    assert names == left
    with pytest.warns(CheckpointWarning, match=f"{killed}: incomplete: no COMPLETE"):
        found = latest(tmp_path, SELF)
    assert found.number == 1 and found.metadata == {"epoch": 1}
    np.testing.assert_array_equal(found.arrays["w"], np.arange(10.0))
    # the next save numbers past the incomplete one, which it deletes
    save(tmp_path, {"w": np.zeros(1)}, comm=SELF)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-000001", "checkpoint-000003"]


def damage_part(folder, how):
    part = folder / "rank-0.npz"
    if how == "truncated":
        size = part.stat().st_size
        with open(part, "r+b") as file:
            file.truncate(size // 2)
        return f"rank-0.npz is cut short: {size // 2} bytes, {size} written"
    if how == "corrupted":
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 0x10  # one bit inside the weights
        part.write_bytes(bytes(data))
        return "rank-0.npz is corrupted: sha256 [0-9a-f]{64}, [0-9a-f]{64} written"
    if how == "grown":
        with open(part, "ab") as file:
            file.write(b"\0")
        return "rank-0.npz is grown"
    if how == "missing":
        part.unlink()
        return "rank-0.npz is missing"
    manifest = folder / "COMPLETE"
    if how == "manifest truncated":
        manifest.write_text(manifest.read_text()[:40])
        return r"COMPLETE is unreadable \(JSONDecodeError"
    if how == "manifest edited":
        edited = json.loads(manifest.read_text())
        edited["parts"][0]["bytes"] += 1
        manifest.write_text(json.dumps(edited))
        return r"COMPLETE is corrupted \(its sha256 does not match its contents\)"
    raise AssertionError(how)


DAMAGE = ["truncated", "corrupted", "grown", "missing", "manifest truncated", "manifest edited"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_checkpoint_is_named_and_the_previous_one_used(tmp_path, how):
    save_numbered(tmp_path, 2)
    newest = tmp_path / "checkpoint-000002"
    fault = damage_part(newest, how)
    with pytest.warns(CheckpointWarning, match=f"passing over checkpoint {newest}: {fault}"):
        found = latest(tmp_path, SELF)
    assert found.number == 1
    assert_state(found.arrays, 1)
    assert len(found.skipped) == 1 and str(newest) in found.skipped[0]


def test_when_every_checkpoint_is_damaged_there_is_none(tmp_path):
    save_numbered(tmp_path, 2)
    damage_part(tmp_path / "checkpoint-000001", "corrupted")
    damage_part(tmp_path / "checkpoint-000002", "missing")
    with pytest.warns(CheckpointWarning) as caught:
        assert latest(tmp_path, SELF) is None
    assert [str(w.message).split(": ", 1)[0] for w in caught] == [
        f"passing over checkpoint {tmp_path / 'checkpoint-000002'}",
        f"passing over checkpoint {tmp_path / 'checkpoint-000001'}",
    ]


def test_check_compatible_names_every_difference():
    saved = {"batch_size": 16, "ranks": 4, "data": "url", "alpha": 1e-4, "shape": [2, 3]}
    check_compatible(saved, {**saved, "shape": (2, 3)})  # compared as JSON: a tuple is a list
    current = {"batch_size": 32, "ranks": 2, "data": "url", "shape": [2, 3], "loss": "hinge"}
    with pytest.raises(ValueError) as raised:
        check_compatible(saved, current, source="run/checkpoint-000004")
    assert str(raised.value) == (
        "cannot resume from run/checkpoint-000004: options that change the result differ: "
        "alpha was 0.0001, now not set; batch_size was 16, now 32; "
        'loss was not set, now "hinge"; ranks was 4, now 2'
    )


def test_checkpoint_numbers_follow_the_newest_folder(tmp_path):
    (tmp_path / "checkpoint-000041").mkdir()  # incomplete, from an earlier run
    (tmp_path / "notes").mkdir()
    assert save(tmp_path, state(1), comm=SELF).name == "checkpoint-000042"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-000042", "notes"]
    assert checkpoint.KEEP == 2
