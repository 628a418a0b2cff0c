"""The svmlight parser and decompression, against scikit-learn's ``load_svmlight_file``."""

import bz2
import gzip
import io
import lzma
import threading
from unittest import mock

import numpy as np
import pytest
from datasets_helpers import MEMBER, libsvm_dir, write_variants
from sklearn.datasets import load_svmlight_file

from sparcml_apps.datasets import ParseError, _svmlight, load_svmlight
from sparcml_apps.datasets._load import to_csr
from sparcml_apps.datasets._svmlight import iter_pieces, read_all, read_file


def assert_same(X, y, X_ref, y_ref):
    X_ref.sort_indices()
    assert X.shape == X_ref.shape
    assert X.has_sorted_indices
    np.testing.assert_array_equal(X.indptr, X_ref.indptr)
    np.testing.assert_array_equal(X.indices, X_ref.indices)
    # bit for bit, as strtod gives them
    np.testing.assert_array_equal(X.data.view(np.int64), X_ref.data.view(np.int64))
    np.testing.assert_array_equal(y, y_ref)


def read_threaded(path, threads, **kwargs):
    """``read_file`` with a thread for every 100 bytes, up to ``threads``."""
    with mock.patch.object(_svmlight, "THREAD_BYTES", 100):
        return read_file(path, threads=threads, **kwargs)


def stream_threaded(text, threads, **kwargs):
    """``iter_pieces`` over ``text`` with a thread for every 100 bytes, up to ``threads``;
    its pieces, copied."""
    with mock.patch.object(_svmlight, "THREAD_BYTES", 100):
        return [
            [array.copy() for array in piece[:4]] + [piece.max_column]
            for piece in iter_pieces(io.BytesIO(text), "text.svm", threads=threads, **kwargs)
        ]


def parse(text, chunk_bytes=1 << 24, tmp_path=None, **kwargs):
    """Rows of ``text`` read whole, checked against the same rows read piece by piece (by 1
    and 3 threads a block) and, given ``tmp_path``, from a file by 1 and 3 threads."""
    rows = read_all(io.BytesIO(text), "text.svm", chunk_bytes=chunk_bytes, **kwargs)
    others = []
    for threads in (1, 3):
        pieces = stream_threaded(text, threads, chunk_bytes=chunk_bytes, **kwargs)
        whole = [np.concatenate([p[k] for p in pieces] or [rows[k]]) for k in range(4)]
        others.append(whole + [max([p[4] for p in pieces], default=-1)])
    if tmp_path is not None:
        (tmp_path / "text.svm").write_bytes(text)
        others += [read_threaded(tmp_path / "text.svm", threads, **kwargs) for threads in (1, 3)]
    for other in others:
        for k, whole in enumerate(rows):
            np.testing.assert_array_equal(whole, other[k])
    return to_csr(rows, kwargs.get("n_features"))


@pytest.mark.parametrize("name", ["a9a", "a9a.t"])
def test_real_files_equal_scikit_learn(name):
    path = libsvm_dir() / name
    X, y = load_svmlight(path, n_features=123)
    assert_same(X, y, *load_svmlight_file(str(path), n_features=123, zero_based=False))
    assert X.dtype == np.float64 and X.indices.dtype == np.int32


def test_compressed_files_equal_scikit_learn(tmp_path):
    paths = write_variants(libsvm_dir() / "a9a.t", tmp_path, "a9a.t")
    X_ref, y_ref = load_svmlight_file(str(paths["none"]), zero_based=False)
    for path in paths.values():
        X, y = load_svmlight(path)  # n_features from the largest index, 122
        assert_same(X, y, X_ref, y_ref)
    for member in (f"archive/{MEMBER}", MEMBER):
        assert_same(*load_svmlight(paths["tar.xz"], member=member), X_ref, y_ref)
    with pytest.raises(ParseError, match=r":archive/README, line 1: expected index:value"):
        load_svmlight(paths["tar.xz"], member="archive/README")


def messy_text(seed=0, rows=2000, unsorted=False):
    """LIBSVM text with everything the format allows: comments, qid, blank lines, tabs,
    trailing spaces, CRLF, signs, exponents, 17-digit values, inf and nan; with
    ``unsorted``, every ninth row lists its indices backwards (same rows otherwise)."""
    rng = np.random.default_rng(seed)
    formats = ["{:.17g}", "{:.16g}", "{:g}", "{:.3e}", "{:.10f}", "{!r}", "{:.4E}"]
    lines = ["# a comment line", ""]
    for row in range(rows):
        columns = np.sort(rng.choice(np.arange(1, 5001), rng.integers(0, 30), replace=False))
        order = -1 if unsorted and row % 9 == 0 else 1
        parts = [rng.choice(["+1", "-1", "1", "0", "2", "1.0", "-1e0", "+2."])]
        if row % 7 == 0:
            parts.append(f"qid:{row}")
        pairs = []
        for column in columns:
            value = float(rng.standard_normal() * 10.0 ** rng.integers(-40, 40))
            pairs.append(f"{column}:{rng.choice(formats).format(value)}")
        if row % 101 == 0 and columns.size:
            pairs[-1] = pairs[-1].split(":")[0] + ":" + rng.choice(["inf", "-inf", "nan"])
        parts += pairs[::order]
        line = rng.choice([" ", "\t", " \t "]).join(parts)
        line += rng.choice(["", "  ", "\t", " # trailing comment 3:4"])
        line += "\r" if row % 13 == 0 else ""
        lines.append(line)
        if row % 17 == 0:
            lines.append(rng.choice(["", "   ", "# comment", "\r"]))
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("chunk_bytes", [1 << 24, 4096, 97])
def test_messy_text_equals_scikit_learn(chunk_bytes, tmp_path):
    # scikit-learn refuses indices out of order; the parser sorts such rows
    reference = io.BytesIO(messy_text())
    X_ref, y_ref = load_svmlight_file(reference, n_features=5000, zero_based=False)
    text = messy_text(unsorted=True)
    X, y = parse(text, chunk_bytes=chunk_bytes, tmp_path=tmp_path, n_features=5000)
    np.testing.assert_array_equal(np.isnan(X.data), np.isnan(X_ref.sorted_indices().data))
    X.data[np.isnan(X.data)] = X_ref.data[np.isnan(X_ref.data)] = 0
    assert_same(X, y, X_ref, y_ref)


def test_gzip_files_read_as_scikit_learn_reads_them(tmp_path):
    # scikit-learn opens a .gz file by its name; here the first bytes tell
    path = tmp_path / "messy.svm.gz"
    path.write_bytes(gzip.compress(messy_text()))
    unnamed = tmp_path / "messy"
    unnamed.write_bytes(path.read_bytes())
    for source in (path, unnamed):
        X_ref, y_ref = load_svmlight_file(str(path), n_features=5000, zero_based=False)
        X, y = load_svmlight(source, n_features=5000)
        np.testing.assert_array_equal(np.isnan(X.data), np.isnan(X_ref.sorted_indices().data))
        X.data[np.isnan(X.data)] = X_ref.data[np.isnan(X_ref.data)] = 0
        assert_same(X, y, X_ref, y_ref)
    cut = tmp_path / "cut.svm.gz"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ParseError, match=rf"^{cut}, line \d+: cannot read the data"):
        load_svmlight(cut, n_features=5000)


def test_small_output_buffers_give_the_same_rows(monkeypatch):
    # first capacities of a few rows: blocks end early and long lines grow the buffers
    from sparcml_apps.datasets import _svmlight

    text = messy_text(seed=1, rows=300)
    X_ref, y_ref = parse(text, n_features=5000)
    monkeypatch.setattr(_svmlight, "_ROWS", 3)
    monkeypatch.setattr(_svmlight, "_NNZ", 5)
    monkeypatch.setattr(_svmlight, "_SLOW", 2)
    assert_same(*parse(text, n_features=5000), X_ref, y_ref)


def test_last_line_without_line_end_and_empty_input(tmp_path):
    X, y = parse(b"1 1:2\n-1 3:4.5", tmp_path=tmp_path)
    np.testing.assert_array_equal(X.toarray(), [[2, 0, 0], [0, 0, 4.5]])
    np.testing.assert_array_equal(y, [1, -1])
    X, y = parse(b"", tmp_path=tmp_path, n_features=4)
    assert X.shape == (0, 4) and y.shape == (0,)


def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    path = tmp_path / "messy.svm"
    path.write_bytes(messy_text(seed=3, rows=300))
    expected = read_threaded(path, 3, n_features=5000)

    def refuse(*args, **kwargs):
        raise OSError("no mapping here")

    monkeypatch.setattr(_svmlight.mmap, "mmap", refuse)
    for whole, read in zip(expected, read_threaded(path, 3, n_features=5000), strict=True):
        np.testing.assert_array_equal(whole, read)


def test_file_read_by_threads_owns_arrays_cut_to_size(tmp_path):
    path = tmp_path / "messy.svm"
    path.write_bytes(messy_text(seed=2, rows=500))
    for threads in (1, 4):
        rows = read_threaded(path, threads, n_features=5000)
        # cut to size in place: scipy would otherwise copy a view of a much larger buffer
        assert all(array.base is None for array in rows[:4])
        assert rows[2].size == rows[0].sum()


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (b"1 1:1\n1 a:1\n", 2, "expected index:value, got 'a:1'"),
        (b"1 1:1\n\n# c\nx 1:1\n", 4, "expected a number as the label, got 'x'"),
        (b"1 1:1 2:\n", 1, "expected a number after the index, got '2:'"),
        (b"1 1:1.5.5\n", 1, "expected a number after the index, got '1:1.5.5'"),
        (b"1 1:1_0\n", 1, "expected a number after the index, got '1:1_0'"),
        (b"1 1:nanx\n", 1, "expected a number as the value, got 'nanx'"),
        (b"1 0:1\n", 1, "feature index 0 in '0:1': LIBSVM indices start at 1"),
        (b"1 3:1 2:1 3:4\n", 1, "feature index 3 appears twice"),
        (b"1 qid:a 1:1\n", 1, "expected qid:<integer>, got 'qid:a'"),
        (b"1 1:1\r\n1 11:1\r\n", 2, "feature index 11 exceeds n_features=10"),
        (b"1 1:1\n3 1:1\n", 2, "label '3' is not one of the classes {-1, 1}"),
        (b"1 1:1\n1.00000000000000000001 1:1\n5e400 1:1\n", 3, "label '5e400' is not one"),
    ],
)
def test_malformed_lines_name_file_and_line(text, line, message, tmp_path):
    with pytest.raises(ParseError, match="^text.svm, line") as caught:
        parse(text, n_features=10, classes=[-1, 1])
    assert caught.value.line == line
    assert str(caught.value).startswith(f"text.svm, line {line}: {message}")
    # read by three threads, the bad line after good ones: still its line in the file
    path = tmp_path / "bad.svm"
    path.write_bytes(b"1 1:1 2:0.5 # a good line\n" * 40 + text)
    with pytest.raises(ParseError) as caught:
        read_threaded(path, 3, n_features=10, classes=[-1, 1])
    assert str(caught.value).startswith(f"{path}, line {40 + line}: {message}")
    # the same, streamed in blocks of 300 bytes that three threads parse at once
    with pytest.raises(ParseError) as caught:
        stream_threaded(path.read_bytes(), 3, chunk_bytes=100, n_features=10, classes=[-1, 1])
    assert str(caught.value).startswith(f"text.svm, line {40 + line}: {message}")


@pytest.mark.parametrize("compression", ["bz2", "xz"])
def test_corrupt_compressed_data_names_file_and_line(tmp_path, compression):
    rng = np.random.default_rng(0)
    lines = [b"1 %d:%.6f\n" % (i % 9 + 1, x) for i, x in enumerate(rng.random(12_000))]
    text = b"".join(lines)
    if compression == "bz2":  # blocks of 100 kB of text: a cut keeps the whole ones
        packed, decompressor = bz2.compress(text, 1), bz2.BZ2Decompressor()
    else:
        packed, decompressor = lzma.compress(text), lzma.LZMADecompressor()
    truncated = tmp_path / f"cut.{compression}"
    truncated.write_bytes(packed[: len(packed) * 2 // 3])
    decoded = decompressor.decompress(truncated.read_bytes())
    assert 1000 < decoded.count(b"\n") < 11_000
    with pytest.raises(ParseError, match=rf"^{truncated}, line \d+: cannot read the data") as cut:
        load_svmlight(truncated)
    assert cut.value.line == decoded.count(b"\n") + 1  # the line the data broke in
    path = tmp_path / f"data.{compression}"
    late = len(packed) * 6 // 7  # bz2: in the second block
    path.write_bytes(packed[:late] + bytes(64) + packed[late + 64 :])
    with pytest.raises(ParseError, match=rf"^{path}, line \d+: cannot read the data") as caught:
        load_svmlight(path)
    assert len(lines) // 2 < caught.value.line <= len(lines)


def test_corrupt_tar_archive_is_a_parse_error(tmp_path):
    paths = write_variants(libsvm_dir() / "a9a.t", tmp_path, "a9a.t")
    packed = paths["tar.xz"].read_bytes()
    broken = tmp_path / "broken.tar.xz"
    for damaged in (packed[:12] + bytes(200) + packed[212:], packed[:400]):
        broken.write_bytes(damaged)
        with pytest.raises(ParseError, match=f"^{broken}, line 1: cannot read the"):
            load_svmlight(broken)
    with pytest.raises(ValueError, match="expected the file 'nope' in the archive; found none"):
        load_svmlight(paths["tar.xz"], member="nope")


def test_declared_compression_must_match_the_bytes(tmp_path):
    from sparcml_apps.datasets._compression import open_data

    path = tmp_path / "data.bz2"
    path.write_bytes(lzma.compress(b"1 1:1\n"))
    with pytest.raises(ValueError, match="expected bz2 data; the file holds xz data"):
        with open_data(path, "bz2"):
            pass


def test_what_a_parsing_thread_raises_reaches_the_caller(tmp_path, monkeypatch):
    # not a ParseError (those name the line): out of memory, say, in the second thread
    text = messy_text(seed=4, rows=400)
    lines = _svmlight._Parser.lines

    def second_part_fails(self, part, line, *, out):
        if part.size and bytes(part[:2]) != text[:2]:
            raise MemoryError("no room for the rows")
        return (yield from lines(self, part, line, out=out))

    monkeypatch.setattr(_svmlight._Parser, "lines", second_part_fails)
    with pytest.raises(MemoryError, match="no room"):
        stream_threaded(text, 2, n_features=5000)
    (tmp_path / "text.svm").write_bytes(text)
    with pytest.raises(MemoryError, match="no room"):
        read_threaded(tmp_path / "text.svm", 2, n_features=5000)


def reading_threads():
    return [t for t in threading.enumerate() if t.name == "read-ahead"]


def test_lines_longer_than_the_room_before_a_block(monkeypatch):
    text = messy_text(seed=2, rows=300)
    X_ref, y_ref = parse(text, n_features=5000)
    monkeypatch.setattr(_svmlight._ReadAhead, "HEAD", 16)  # most lines cut: longer
    assert_same(*parse(text, chunk_bytes=97, n_features=5000), X_ref, y_ref)
    assert not reading_threads()


class FailingStream(io.BytesIO):
    """Text read 1000 bytes at a time; after ``good`` reads, reading raises ``error``."""

    def __init__(self, text, good, error):
        super().__init__(text)
        self.good, self.error = good, error

    def readinto1(self, buffer):
        self.good -= 1
        if self.good < 0:
            raise self.error
        return super().readinto1(memoryview(buffer)[:1000])


def test_the_thread_reading_ahead_ends_with_the_parse():
    text = messy_text(seed=3, rows=400)
    # what reading raises (not a read error, which ends the data at its line) is raised
    with pytest.raises(MemoryError, match="no room to read"):
        list(iter_pieces(FailingStream(text, 30, MemoryError("no room to read")), "text.svm"))
    with pytest.raises(ParseError, match=r"^text.svm, line \d+: cannot read the data: cut"):
        list(iter_pieces(FailingStream(text, 30, EOFError("cut")), "text.svm"))
    # the caller stops early, or the parse fails: the thread stops too
    pieces = iter_pieces(FailingStream(text, 10**9, None), "text.svm", chunk_bytes=2000)
    next(pieces)
    assert len(reading_threads()) == 1
    pieces.close()
    bad = text[:20_000] + b"1 x:1\n" + text[20_000:]
    with pytest.raises(ParseError, match="expected index:value"):
        list(iter_pieces(FailingStream(bad, 10**9, None), "text.svm", chunk_bytes=2000))
    assert not reading_threads()
