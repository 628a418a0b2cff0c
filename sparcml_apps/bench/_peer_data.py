"""The rows of the peers benchmark, written once as files every system reads.

A dataset is one of the synthetic generators (:data:`GENERATORS`), a catalogue name whose
file is in the data home, or a LIBSVM file ``TRAIN[,TEST]``. Its training and test rows
are written as LIBSVM files (1-based indices, labels -1 and +1), as Vowpal Wabbit text
beside them (``.vw``), and the first ``search_rows`` training rows again, split 80/20, as
the rows on which each system's setting is searched.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file
from sklearn.model_selection import train_test_split

from .._paths import OptionError
from ..datasets import GENERATORS, dataset_path, load, load_svmlight, make_url_like, read_catalog
from ..datasets._cache import is_cache
from ._peer_systems import vw

TEST_FRACTION = 0.2
"""Rows held out for testing where a dataset has no test file."""
SPLIT_SEED = 0
"""The seed of the stratified split of a dataset without a test file."""
SEARCH_FRACTION = 0.2
"""Share of the search rows that scores the candidates."""


@dataclass(frozen=True)
class Files:
    """One dataset as written: LIBSVM files (``vw(path)``: the Vowpal Wabbit file)."""

    name: str
    n_features: int
    rows: int
    test_rows: int
    train: Path
    test: Path
    search_train: Path
    search_valid: Path
    split: str = ""  # how the test rows were held out (:func:`split`)

    def as_dict(self):
        return {key: str(value) for key, value in self.__dict__.items()}


def in_data_home(data_home=None):
    """The specs of the catalogue's training datasets already in the data home (file or
    CSR cache), each with its test split when that is there too."""
    catalog = read_catalog()
    present = {d.name for d in catalog if _present(d.name, data_home)}
    specs = []
    for d in catalog:
        if d.name in present and d.split != "test":
            partner = _partner(catalog, d)
            specs.append(d.name + (f",{partner}" if partner in present else ""))
    return specs


def _present(name, data_home):
    return dataset_path(name, data_home=data_home).exists() or is_cache(
        dataset_path(name, data_home=data_home, cache=True)
    )


def _partner(catalog, dataset):
    """The name of the test split of a training dataset (``a9a.t``, ``kdd12.val``)."""
    if dataset.split != "train":
        return None
    stems = {dataset.name, dataset.name.rsplit(".", 1)[0]}
    for d in catalog:
        if d.split == "test" and d.name.rsplit(".", 1)[0] in stems:
            return d.name
    return None


def check(spec, data_home=None):
    """Raise OptionError naming ``spec`` unless it is a generator, a file, or a catalogue
    name whose file is in the data home (with its test part, after a comma)."""
    if spec in GENERATORS:
        return
    names = read_catalog().datasets
    for part in spec.split(","):
        if Path(part).is_file() or (part in names and _present(part, data_home)):
            continue
        where = "not in the data home" if part in names else "not a file"
        raise OptionError(
            f"--datasets {part}: expected one of {', '.join(GENERATORS)}, a LIBSVM file or a "
            f"catalogue name in the data home; it is {where}"
        )


def split(spec):
    """How :func:`rows` holds out the test rows of ``spec``, in words."""
    if spec in GENERATORS:
        return "the generator's last fifth (its rows are independent draws)"
    if "," in spec:
        return "the dataset's test file"
    return f"a stratified random fifth (seed {SPLIT_SEED})"


def rows(spec, *, generator_rows, max_rows, max_test_rows, data_home=None):
    """``(name, X, y, X_test, y_test)`` of ``spec``, labels -1 and +1. Generators make
    ``generator_rows`` rows (seed 0) and hold out their last fifth; a dataset without a
    test part holds out a stratified random fifth (:data:`SPLIT_SEED`; its rows may come
    sorted by label), its training rows shuffled; of a dataset, at most the first
    ``max_rows`` training rows and ``max_test_rows`` test rows are kept."""
    if spec in GENERATORS:
        X, y = make_url_like(generator_rows, random_state=0, **GENERATORS[spec])
        cut = X.shape[0] - int(round(TEST_FRACTION * X.shape[0]))
        return spec, X[:cut], y[:cut], X[cut:], y[cut:]
    train, _, test = spec.partition(",")
    X, y = _read(train, data_home)
    if test:
        X_test, y_test = _read(test, data_home)
    else:
        y, _ = _signs(spec, y, y[:0])  # (a third label would fail the split's strata)
        X, X_test, y, y_test = train_test_split(
            X, y, test_size=TEST_FRACTION, stratify=y, random_state=SPLIT_SEED
        )
    X, y = X[:max_rows], y[:max_rows]
    X_test, y_test = X_test[:max_test_rows], y_test[:max_test_rows]
    width = max(X.shape[1], X_test.shape[1])
    X.resize(X.shape[0], width)
    X_test.resize(X_test.shape[0], width)
    y, y_test = _signs(spec, y, y_test)
    return Path(train).name, X, y, X_test, y_test


def _read(part, data_home):
    if Path(part).is_file():
        return load_svmlight(part)
    return load(part, data_home=data_home, download=False, progress=False)


def _signs(spec, y, y_test):
    """The labels as -1 and +1: the larger of two values is +1."""
    values = np.unique(np.concatenate([y, y_test]))
    if values.size != 2:
        raise ValueError(
            f"dataset {spec!r}: expected two label values (a binary task); got {values.size}"
        )
    return np.where(y == values[1], 1.0, -1.0), np.where(y_test == values[1], 1.0, -1.0)


def write(folder, name, X, y, X_test, y_test, *, search_rows, split=""):
    """Write the dataset's files into ``folder``; their :class:`Files` (``split``: how
    the test rows were held out)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    searched = min(search_rows, X.shape[0])
    cut = searched - int(round(SEARCH_FRACTION * searched))
    files = Files(
        name=name,
        n_features=X.shape[1],
        rows=X.shape[0],
        test_rows=X_test.shape[0],
        train=folder / "train.svm",
        test=folder / "test.svm",
        search_train=folder / "search-train.svm",
        search_valid=folder / "search-valid.svm",
        split=split,
    )
    for path, rows_ in (
        (files.train, slice(None)),
        (files.search_train, slice(None, cut)),
        (files.search_valid, slice(cut, searched)),
    ):
        _write_pair(path, X[rows_], y[rows_])
    _write_pair(files.test, X_test, y_test)
    return files


def _write_pair(path, X, y):
    """``path`` in LIBSVM text, and its Vowpal Wabbit twin: ``label |f index:value ...``."""
    dump_svmlight_file(X, y.astype(np.int8), str(path), zero_based=False)
    with open(path) as source, open(vw(path), "w") as target:
        for line in source:
            label, _, features = line.partition(" ")
            target.write(f"{label} |f {features}" if features else f"{label} |f\n")
