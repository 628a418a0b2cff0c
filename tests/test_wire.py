"""The socket between a pool's caller and its workers (:mod:`sparcml_apps.backends.pool._wire`): the
handshake, and arrays that travel in sealed shared memory, not through the socket."""

import mmap
import os
import socket
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from sparcml_apps.backends.pool import _wire

KEY = bytes(range(32))


def both_ends(left, right):
    """Run ``left(sock)`` here and ``right(sock)`` in a thread, on the two ends of a
    socket pair; what each returned or raised."""
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    found = {}

    def run(name, end, sock):
        try:
            found[name] = end(sock)
        except Exception as exc:  # noqa: BLE001 - compared by the test
            found[name] = exc
        finally:
            sock.close()

    thread = threading.Thread(target=run, args=("right", right, b))
    thread.start()
    run("left", left, a)
    thread.join(10)
    return found["left"], found["right"]


def test_the_same_key_passes_the_handshake():
    left, right = both_ends(
        lambda s: _wire.handshake(s, KEY, "caller"), lambda s: _wire.handshake(s, KEY, "worker")
    )
    assert left is None and right is None


def test_another_key_is_refused_at_both_ends():
    other = bytes(32)
    left, right = both_ends(
        lambda s: _wire.handshake(s, KEY, "caller"), lambda s: _wire.handshake(s, other, "worker")
    )
    assert isinstance(left, _wire.AuthenticationError)
    assert isinstance(right, (_wire.AuthenticationError, EOFError, ConnectionError))
    assert "does not hold the pool's key" in str(left)


def test_the_callers_own_answer_passed_back_is_refused():
    def reflect(sock):  # no key: send back the challenge, then the answer to it
        greeting = _wire.receive_exactly(sock, 15 + 32)
        sock.sendall(greeting)
        sock.sendall(_wire.receive_exactly(sock, 32))

    left, _ = both_ends(lambda s: _wire.handshake(s, KEY, "caller"), reflect)
    assert isinstance(left, _wire.AuthenticationError)


def test_a_stranger_is_refused_before_anything_is_read_but_the_greeting():
    def stranger(sock):
        sock.sendall(b"GET / HTTP/1.1\r\n" * 4)
        return _wire.receive_exactly(sock, 15 + 32)  # then the other end hangs up

    left, _ = both_ends(lambda s: _wire.handshake(s, KEY, "caller"), stranger)
    assert isinstance(left, _wire.AuthenticationError)
    assert "does not speak this protocol" in str(left)


def test_arrays_travel_in_shared_memory_each_once():
    shared = np.arange(1_000_000, dtype=np.float64)  # 8 MB, in both messages
    first = {"shared": shared, "own": np.arange(10, dtype=np.int32), "name": "first"}
    strided = np.arange(200_000.0).reshape(-1, 2)[:, 0]  # a column: copied, contiguous
    second = {"shared": shared, "own": strided, "name": "second"}
    fd, packed = _wire.pack([first, second])
    try:
        # one copy of the shared array and the other two, each aligned
        assert os.fstat(fd).st_size == shared.nbytes + 64 + strided.size * 8
        assert all(len(pickle) < 1000 for pickle, _ in packed)
        out = [_wire.unpack(pickle, table, os.dup(fd)) for pickle, table in packed]
        for sent, got in zip([first, second], out, strict=True):
            assert got["name"] == sent["name"]
            for key in ("shared", "own"):
                assert got[key].dtype == sent[key].dtype
                assert np.array_equal(got[key], sent[key])
        # the arrays are the receiver's to change (copy-on-write): the memory is not
        out[0]["shared"][:] = -1
        assert np.array_equal(_wire.unpack(*packed[1], os.dup(fd))["shared"], shared)
    finally:
        os.close(fd)


def test_the_shared_memory_is_sealed_against_writes():
    fd, _ = _wire.pack([np.zeros(100)])
    try:
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"x", 0)
        with pytest.raises(PermissionError):
            mmap.mmap(fd, 800, access=mmap.ACCESS_WRITE)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def test_a_link_passes_the_memory_with_the_message():
    sender, receiver = socket.socketpair()
    with sender, receiver:
        rows = np.random.default_rng(0).random(500_000)  # 4 MB
        out, back = _wire.Link(sender), _wire.Link(receiver)
        out.send(("rows", rows))
        out.send(("beat",))
        kind, got = back.receive()
        assert kind == "rows" and np.array_equal(got, rows)
        assert back.receive() == ("beat",)
        assert out.sent == back.received < 1000


def test_a_closed_socket_is_an_eof():
    sender, receiver = socket.socketpair()
    sender.close()
    with receiver, pytest.raises(EOFError):
        _wire.Link(receiver).receive()


def test_a_shelf_is_filled_again_and_grows_when_it_must():
    shelf = _wire.Shelf()
    try:
        found = []
        for values in (np.arange(100_000.0), -np.arange(50_000.0), np.ones(300_000)):
            fd, ((pickle, table),) = _wire.pack([values], shelf)
            found.append((shelf.memory, os.fstat(fd).st_size))
            assert np.array_equal(_wire.unpack(pickle, table, os.dup(fd)), values)
        # the second pack, smaller, went into the first's memory; the third needed more
        assert found[1][0] is found[0][0] and found[1][1] == found[0][1] == 800_000
        assert found[2][0] is not found[0][0] and found[2][1] == 2_400_000
    finally:
        shelf.close()
    assert shelf.fd is None


def _mappings():
    """``{start address: (inode, fields)}`` of this process's mappings, from smaps."""
    found, current = {}, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:
            current = found[int(head[0].split("-")[0], 16)] = (int(head[4]), {})
        else:
            current[1][head[0].rstrip(":")] = head[1:]
    return found


def _address(memory):
    return np.frombuffer(memory, np.uint8).ctypes.data


def _huge_kb(fields):
    return int(fields["FilePmdMapped"][0]) + int(fields["ShmemPmdMapped"][0])


def test_a_shelf_is_a_file_of_the_temp_directory_with_no_name(tmp_path, monkeypatch):
    try:
        os.close(os.open(tmp_path, os.O_TMPFILE | os.O_RDWR, 0o600))
    except OSError as exc:
        pytest.skip(f"the temp directory's file system makes no unnamed files: {exc}")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(_wire, "_clean_bytes", lambda: 1 << 40)  # however dirty the cache
    shelf = _wire.Shelf()
    values = np.arange(1 << 20, dtype=np.float64)
    try:
        fd, ((pickle, table),) = _wire.pack([values], shelf)
        assert os.readlink(f"/proc/self/fd/{fd}").startswith(f"{tmp_path}/#")
        assert os.fstat(fd).st_mode & 0o777 == 0o600
        assert os.fstat(fd).st_blocks * 512 >= values.nbytes  # its blocks taken up front
        assert list(tmp_path.iterdir()) == []
        assert np.array_equal(_wire.unpack(pickle, table, os.dup(fd)), values)
        inode, fields = _mappings()[_address(shelf.memory)]
        assert inode == os.fstat(fd).st_ino
        assert "hg" in fields["VmFlags"]  # madvise(MADV_HUGEPAGE)
    finally:
        shelf.close()


@pytest.mark.parametrize("why", ["no unnamed files there", "past the dirty threshold"])
def test_a_shelf_is_a_memfd_where_a_file_would_not_do(why, monkeypatch):
    if why == "no unnamed files there":
        monkeypatch.setattr(tempfile, "tempdir", "/proc")
    else:
        monkeypatch.setattr(_wire, "_clean_bytes", lambda: 1 << 20)
    shelf = _wire.Shelf()
    values = np.arange(1 << 18, dtype=np.float64)  # 2 MiB
    try:
        fd, ((pickle, table),) = _wire.pack([values], shelf)
        assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:sparcml-jobs")
        assert np.array_equal(_wire.unpack(pickle, table, os.dup(fd)), values)
    finally:
        shelf.close()


def test_the_receiver_maps_the_shelf_in_huge_pages_where_the_shelf_has_them():
    shelf = _wire.Shelf()
    values = np.arange(4 << 20, dtype=np.float64)  # 32 MiB
    try:
        fd, ((pickle, table),) = _wire.pack([values], shelf)
        inode, fields = _mappings()[_address(shelf.memory)]
        if _huge_kb(fields) < 16 << 10:
            pytest.skip("this machine gives neither shared memory nor the temp directory's "
                        "files huge pages (shmem_enabled, the file system)")  # fmt: skip
        got = _wire.unpack(pickle, table, os.dup(fd))
        assert float(got.sum()) == float(values.sum())  # every page read
        mapped = [
            fields for start, (node, fields) in _mappings().items()
            if node == inode and start != _address(shelf.memory)
        ]  # fmt: skip
        assert sum(_huge_kb(f) for f in mapped) >= 16 << 10  # kB
        del got
    finally:
        shelf.close()
