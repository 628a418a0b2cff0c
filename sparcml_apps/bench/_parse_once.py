"""Load one LIBSVM file with one parser in this fresh process; print the timings as JSON.

Run as a script (``python _parse_once.py PARSER PATH N_FEATURES``), not as a module, so
that a peer parser's process imports nothing of sparcml. PARSER is ``sparcml``,
``svmloader`` or ``sklearn``. Prints: the seconds to import the parser, to load the file,
and (sparcml) to load it again; the CPU seconds of the import and load; a digest of the
matrix and labels; the parser's version.
"""

import os
import time


def cpu():
    times = os.times()
    return times.user + times.system


start, start_cpu = time.perf_counter(), cpu()

import hashlib  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

parser, path, n_features = sys.argv[1], sys.argv[2], int(sys.argv[3])
if parser == "sparcml":
    from sparcml_apps.datasets import load_svmlight

    def load():
        return load_svmlight(path, n_features=n_features)

elif parser == "svmloader":
    from svmloader import load_svmfile

    def load():
        return load_svmfile(path, dtype="d", ltype="d", nfeatures=n_features, zero_based=False)

else:
    from sklearn.datasets import load_svmlight_file

    def load():
        return load_svmlight_file(path, n_features=n_features, zero_based=False)


imported, imported_cpu = time.perf_counter(), cpu()
X, y = load()
loaded, loaded_cpu = time.perf_counter(), cpu()
digest = hashlib.sha256()
for array in (X.indptr.astype("int64"), X.indices.astype("int64"), X.data, y.astype("float64")):
    digest.update(array.tobytes())
record = {
    "import_seconds": imported - start,
    "load_seconds": loaded - imported,
    "cpu_seconds": loaded_cpu - start_cpu,  # of all threads, import and load
    "load_cpu_seconds": loaded_cpu - imported_cpu,
    "rows": X.shape[0],
    "nnz": int(X.nnz),
    "digest": digest.hexdigest(),
}
if parser == "sparcml":
    import numba

    # the first result is kept, so that the second load also writes to new memory
    again, again_cpu = time.perf_counter(), cpu()
    load()
    record["again_seconds"] = time.perf_counter() - again
    record["again_cpu_seconds"] = cpu() - again_cpu
    record["threads"] = numba.config.NUMBA_NUM_THREADS
distribution = {"sparcml": "sparcml", "svmloader": "svmloader", "sklearn": "scikit-learn"}
record["version"] = importlib.metadata.version(distribution[parser])
print(json.dumps(record))
