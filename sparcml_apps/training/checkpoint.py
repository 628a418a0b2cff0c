"""Checkpoints of a training run: every rank's arrays, written atomically and verified.

A checkpoint is a folder ``checkpoint-NNNNNN`` (numbered from 1) in the checkpoint
directory: one part a rank, ``rank-R.npz`` (the rank's named arrays and its metadata), and
``COMPLETE``, written by rank 0 once every rank's part is on disk: the number of ranks and
each part's size and sha256, with a sha256 of its own. Every file is written to a temporary
file in the same folder, flushed to disk, renamed into place, and the folder flushed too.
A run stopped at any moment therefore leaves the checkpoints before it whole; a folder
without ``COMPLETE`` is incomplete and ignored. :func:`save` keeps the newest ``KEEP``
complete checkpoints and deletes the rest; :func:`latest` returns the newest whose
manifest and parts all verify, and names each newer one it passes over.

Both are collective over ``comm`` (``None``: ``MPI.COMM_WORLD``; ``MPI.COMM_SELF`` for one
process): every rank of it must see the same directory (on several nodes, a shared file
system). A rank that fails makes every rank raise (:func:`collectives.check`).

:class:`Checkpoints` keeps a training run's state (:mod:`sparcml_apps.training`: the
weights and every state array, and where the run stands) with the options and data that
must match for a run to resume from it.
"""

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import collectives

from .._modes import set_default_mode
from .state import Progress, Weights

KEEP = 2
"""How many complete checkpoints :func:`save` keeps."""
MANIFEST = "COMPLETE"
FORMAT = 1
_FOLDER = re.compile(r"checkpoint-(\d+)")
_METADATA = "__metadata__"  # the entry of a part that holds the rank's metadata (JSON)
_BLOCK = 1 << 20


class CheckpointWarning(UserWarning):
    """A checkpoint was passed over (incomplete or damaged), or an old one not deleted."""


class _Damaged(Exception):
    """What is wrong with one file of a checkpoint."""


@dataclass
class Checkpoint:
    """One rank's view of a checkpoint read by :func:`latest`."""

    path: Path  # the checkpoint's folder
    number: int
    arrays: dict  # this rank's arrays, by name
    metadata: dict  # this rank's metadata
    skipped: list = field(default_factory=list)  # why each newer checkpoint was passed over


class Checkpoints:
    """The checkpoints of one training run in ``directory``: the state after every epoch,
    and within an epoch every ``seconds`` (None: never) where it can be resumed from.

    ``options`` (the same on every rank) and ``data`` (this rank's, :func:`fingerprint`)
    are kept with every checkpoint: a run resumes only from one whose options and data
    are its own.
    """

    def __init__(self, directory, seconds, options, data):
        self.directory, self.seconds = Path(directory), seconds
        self.options, self.data = _plain(options), _plain(data)
        self._saved = time.monotonic()

    def due(self, comm):
        """Whether ``seconds`` have passed since the last save (rank 0's clock decides)."""
        if self.seconds is None:
            return False
        due = time.monotonic() - self._saved >= self.seconds
        return bool(comm.bcast(due, root=0)) if comm.Get_size() > 1 else due

    def save(self, weights, progress, comm):
        """Save the run's state: ``weights`` (:class:`.state.Weights`) and ``progress``
        (:class:`.state.Progress`); collective."""
        metadata = {"options": self.options, "data": self.data, "progress": progress.as_dict()}
        save(self.directory, weights.arrays(), _plain(metadata), comm)
        self._saved = time.monotonic()

    def resume(self, comm):
        """``(weights, progress, folder)`` of the newest complete checkpoint, or None when
        there is none; collective. Raises ValueError naming every option, or datum of a rank, that
        differs from this run's."""
        found = latest(self.directory, comm)
        if found is None:
            return None
        error = None
        try:
            check_compatible(found.metadata["options"], self.options, str(found.path))
            where = f"{found.path} (the rows of rank {comm.Get_rank()})"
            check_compatible(found.metadata["data"], self.data, where)
        except ValueError as exc:
            error = exc
        collectives.check(error, comm)
        weights = Weights.from_arrays(found.arrays)
        return weights, Progress.from_dict(found.metadata["progress"]), found.path


def fingerprint(X, y, weight):
    """What identifies a rank's rows without keeping them: their counts and sums, and
    checksums of the row lengths, the labels and the weights, and of every 1009th entry."""
    sample = slice(None, None, 1009)
    return {
        "rows": int(X.shape[0]),
        "columns": int(X.shape[1]),
        "nonzeros": int(X.nnz),
        "sum of values": float(X.data.sum()),
        "checksum": zlib.crc32(
            np.diff(X.indptr).astype(np.int64).tobytes()
            + np.asarray(y, np.float64).tobytes()
            + np.asarray(weight, np.float64).tobytes()
            + np.ascontiguousarray(X.indices[sample], np.int64).tobytes()
            + np.ascontiguousarray(X.data[sample], np.float64).tobytes()
        ),
    }


def _plain(value):
    """``value`` as JSON holds it: numpy numbers and arrays become Python's."""

    def convert(item):
        if isinstance(item, np.generic | np.ndarray):
            return item.tolist()
        raise TypeError(f"cannot keep {type(item).__name__} in a checkpoint's metadata")

    return json.loads(json.dumps(value, default=convert))


def save(directory, arrays, metadata=None, comm=None, *, keep=KEEP):
    """Write every rank's ``arrays`` and ``metadata`` as the next checkpoint; collective.

    ``arrays``: a dict of names to numpy arrays (no object dtype); ``metadata``: a dict
    that ``json`` can write. Each rank passes its own. Returns the checkpoint's folder,
    complete on return; then only the newest ``keep`` complete checkpoints remain.
    """
    comm = _comm(comm)
    rank = comm.Get_rank()
    root = Path(directory)
    number, entries, error = None, None, None
    try:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise ValueError(f"keep must be an int of at least 1; got {keep!r}")
        entries = _entries(arrays, metadata)
        if rank == 0:
            root.mkdir(parents=True, exist_ok=True)
            number = max(_numbers(root), default=0) + 1
            (root / _folder(number)).mkdir()
            _sync_folder(root)
    except Exception as exc:  # noqa: BLE001 - every rank raises it, below
        error = exc
    collectives.check(error, comm)
    folder = root / _folder(comm.bcast(number, root=0))
    part = None
    try:
        part = _write(folder / _part(rank), lambda file: np.savez(file, **entries))
    except Exception as exc:  # noqa: BLE001
        error = exc
    collectives.check(error, comm)
    parts = comm.gather(part, root=0)
    if rank == 0:
        try:
            body = {"format": FORMAT, "ranks": len(parts), "parts": parts}
            text = json.dumps({**body, "sha256": _digest(body)}, indent=1) + "\n"
            _write(folder / MANIFEST, lambda file: file.write(text.encode()))
            _sync_folder(root)
        except Exception as exc:  # noqa: BLE001
            error = exc
    collectives.check(error, comm)
    if rank == 0:
        _prune(root, keep)
    return folder


def latest(directory, comm=None):
    """The newest complete checkpoint whose every part verifies, as a :class:`Checkpoint`
    of this rank's arrays and metadata, or None; collective.

    A newer checkpoint that is incomplete or damaged (a part missing, cut short or changed;
    the manifest unreadable) is passed over: rank 0 warns (:class:`CheckpointWarning`)
    naming its folder, file and fault. Raises ValueError when the checkpoint to use was
    written by another number of ranks than ``comm``'s.
    """
    comm = _comm(comm)
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    root = Path(directory)
    candidates, error = None, None
    if rank == 0:
        try:
            candidates = _candidates(root)
        except Exception as exc:  # noqa: BLE001
            error = exc
    collectives.check(error, comm)
    skipped = []
    for number, manifest, fault in comm.bcast(candidates, root=0):
        folder = root / _folder(number)
        if fault is None and manifest["ranks"] != nprocs:
            raise ValueError(
                f"cannot resume from {folder}: it was written by {_ranks(manifest['ranks'])}, "
                f"this run has {nprocs}"
            )
        loaded = None
        if fault is None:
            try:
                loaded = _read(folder / _part(rank), manifest["parts"][rank])
            except _Damaged as exc:
                fault = str(exc)
            except Exception as exc:  # noqa: BLE001 - not damage (out of memory...): raised
                error = exc
            collectives.check(error, comm)
            faults = [f for f in comm.allgather(fault) if f is not None]
            fault = "; ".join(faults) or None
        if fault is None:
            arrays, metadata = loaded
            return Checkpoint(folder, number, arrays, metadata, skipped)
        skipped.append(f"{folder}: {fault}")
        if rank == 0:
            warnings.warn(f"passing over checkpoint {skipped[-1]}", CheckpointWarning, stacklevel=2)
    return None


def check_compatible(saved, current, source="the checkpoint"):
    """Raise ValueError naming every key whose value differs between ``saved`` (options
    read from ``source``) and ``current`` (this run's options, compared as JSON)."""
    current = json.loads(json.dumps(current))
    differences = []
    for key in sorted(saved.keys() | current.keys()):
        was, now = saved.get(key, "not set"), current.get(key, "not set")
        if key not in saved or key not in current or was != now:
            differences.append(f"{key} was {_show(was)}, now {_show(now)}")
    if differences:
        raise ValueError(
            f"cannot resume from {source}: options that change the result differ: "
            + "; ".join(differences)
        )


def _ranks(count):
    return f"{count} rank" if count == 1 else f"{count} ranks"


def _show(value):
    return value if value == "not set" else json.dumps(value)


def _comm(comm):
    if comm is None:
        from mpi4py import MPI

        return MPI.COMM_WORLD
    return comm


def _folder(number):
    return f"checkpoint-{number:06d}"


def _part(rank):
    return f"rank-{rank}.npz"


def _numbers(root):
    """The numbers of the checkpoint folders in ``root``, newest first."""
    found = (_FOLDER.fullmatch(path.name) for path in root.iterdir() if path.is_dir())
    return sorted((int(match[1]) for match in found if match), reverse=True)


def _entries(arrays, metadata):
    """What ``np.savez`` writes for one part; TypeError or ValueError for bad input."""
    if not isinstance(arrays, dict):
        raise TypeError(f"arrays must be a dict of names to numpy arrays; got {type(arrays)}")
    for name, array in arrays.items():
        if not isinstance(name, str) or name == _METADATA:
            raise ValueError(f"arrays: names must be strings but {_METADATA!r}; got {name!r}")
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            kind = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
            raise TypeError(f"arrays[{name!r}] must be a numpy array of numbers; got {kind}")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict; got {type(metadata).__name__}")
    try:
        text = json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"metadata must be a dict that JSON can write: {exc}") from None
    return {**arrays, _METADATA: np.array(text)}


def _write(path, write):
    """Write the file ``path`` by ``write(binary file)`` atomically; its size and sha256."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w+b") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
            file.seek(0)
            sha256 = _sha256(file)
            size = file.tell()
        set_default_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return {"file": path.name, "bytes": size, "sha256": sha256}


def _sha256(file):
    digest = hashlib.sha256()
    while block := file.read(_BLOCK):
        digest.update(block)
    return digest.hexdigest()


def _digest(body):
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _sync_folder(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _candidates(root):
    """``(number, manifest, fault)`` of every checkpoint folder, newest first: the
    manifest when it verifies, else None and what is wrong."""
    if not root.is_dir():
        return []
    found = []
    for number in _numbers(root):
        manifest, fault = None, None
        try:
            manifest = _manifest(root / _folder(number) / MANIFEST)
        except _Damaged as exc:
            fault = str(exc)
        found.append((number, manifest, fault))
    return found


def _manifest(path):
    try:
        manifest = json.loads(path.read_text())
        sha256 = manifest.pop("sha256")
        intact = sha256 == _digest(manifest) and manifest["format"] == FORMAT
        ranks, parts = manifest["ranks"], manifest["parts"]
    except FileNotFoundError:
        raise _Damaged(f"incomplete: no {MANIFEST} manifest (the save did not finish)") from None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise _Damaged(f"{MANIFEST} is unreadable ({type(e).__name__}: {e})") from None
    if not intact:
        raise _Damaged(f"{MANIFEST} is corrupted (its sha256 does not match its contents)")
    if not isinstance(ranks, int) or not isinstance(parts, list) or len(parts) != ranks:
        raise _Damaged(f"{MANIFEST} lists {len(parts)} parts for {ranks} ranks")
    return manifest


def _read(path, part):
    """This rank's arrays and metadata from ``path``, checked against its manifest entry."""
    name = path.name
    if part.get("file") != name:
        raise _Damaged(f"{MANIFEST} lists {part.get('file')!r} where {name!r} belongs")
    try:
        with open(path, "rb") as file:
            sha256 = _sha256(file)
            size = file.tell()
    except FileNotFoundError:
        raise _Damaged(f"{name} is missing") from None
    except OSError as exc:
        raise _Damaged(f"{name} cannot be read ({exc.strerror})") from None
    if size != part["bytes"]:
        how = "cut short" if size < part["bytes"] else "grown"
        raise _Damaged(f"{name} is {how}: {size} bytes, {part['bytes']} written")
    if sha256 != part["sha256"]:
        raise _Damaged(f"{name} is corrupted: sha256 {sha256}, {part['sha256']} written")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
        metadata = json.loads(str(arrays.pop(_METADATA)))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise _Damaged(f"{name} is unreadable ({type(exc).__name__}: {exc})") from None
    return arrays, metadata


def _prune(root, keep):
    """Delete every checkpoint folder older than the newest but the newest ``keep``
    complete ones; a folder that cannot be deleted is left with a warning."""
    numbers = _numbers(root)
    complete = [n for n in numbers if (root / _folder(n) / MANIFEST).exists()]
    for number in numbers:
        if number < complete[0] and number not in complete[:keep]:
            folder = root / _folder(number)
            try:
                (folder / MANIFEST).unlink(missing_ok=True)  # incomplete from here on
                shutil.rmtree(folder)
            except OSError as exc:
                warnings.warn(
                    f"could not delete the old checkpoint {folder}: {exc}",
                    CheckpointWarning,
                    stacklevel=3,
                )
