"""Every allreduce algorithm against MPI's own dense Allreduce, over a matrix of cases.

Run under ``mpiexec -n P``. Prints ``cases N`` and one ``FAIL ...`` line per failure; exits
1 on any failure. Tolerance: |result - reference| <= rtol * (sum over ranks of |x|).
"""

import sys

import numpy as np
from mpi4py import MPI

import collectives
from collectives import SparseVector, allreduce, thresholds

comm = MPI.COMM_WORLD
P, rank = comm.size, comm.rank
thresholds.WAIT = sys.argv[1] if len(sys.argv) > 1 else "auto"
RTOL = {np.float32: 1e-5, np.float64: 1e-12}
failures = []
cases = 0


def rng_for(*key):
    return np.random.default_rng([rank, *[abs(hash(k)) % 2**32 for k in key]])


def supports(kind, size, rng):
    """The sorted indices this rank holds for a case."""
    if kind == "empty":
        return np.array([], np.int64)
    if kind == "empty_on_even":
        return np.array([], np.int64) if rank % 2 == 0 else supports("random_0.01", size, rng)
    if kind == "one_element_on_rank0":
        return np.array([size // 2]) if rank == 0 else np.array([], np.int64)
    if kind == "one_element_each":
        return np.array([(rank * 7919) % size])
    if kind == "disjoint":
        return np.arange(rank, size, P)
    if kind == "identical":
        return np.sort(np.random.default_rng(1).choice(size, max(1, size // 10), replace=False))
    if kind == "dense":
        return np.arange(size)
    if kind == "boundaries":  # both sides of every split boundary
        bounds = np.arange(P + 1) * size // P
        near = np.concatenate([bounds - 1, bounds, bounds + 1])
        return np.unique(near[(near >= 0) & (near < size)])
    if kind.startswith("random_"):
        k = int(round(float(kind.split("_")[1]) * size))
        return np.sort(rng.choice(size, min(k, size), replace=False))
    raise ValueError(kind)


def check(kind, size, dtype, algorithm, out, integer_values=False, as_dense=False):
    global cases
    cases += 1
    rng = rng_for(kind, size, dtype.__name__)
    indices = supports(kind, size, rng)
    if integer_values:
        values = rng.integers(-8, 9, indices.size).astype(dtype)
    else:
        values = rng.standard_normal(indices.size).astype(dtype)
    vec = SparseVector(indices, values, size)
    dense = vec.to_dense()
    reference = np.empty_like(dense)
    comm.Allreduce(dense, reference)
    magnitude = np.empty_like(dense)
    comm.Allreduce(np.abs(dense), magnitude)
    stats = collectives.Stats()
    label = (
        f"{kind} size={size} {dtype.__name__} {algorithm} out={out}"
        + (" int" if integer_values else "")
        + (" dense-input" if as_dense else "")
    )
    given = dense.copy() if as_dense else vec
    # "into": a new array receives the sum; "in_place": the dense input itself
    into = {"into": np.full(size, np.nan, dtype), "in_place": given}.get(out, out)
    try:
        result = allreduce(given, comm, algorithm=algorithm, out=into, stats=stats)
    except Exception as exc:  # noqa: BLE001 - reported as a failed case
        failures.append(f"{label}: raised {exc!r}")
        return
    if out == "sparse" and not isinstance(result, SparseVector):
        failures.append(f"{label}: out=sparse gave {type(result).__name__}")
        return
    if out == "dense" and not isinstance(result, np.ndarray):
        failures.append(f"{label}: out=dense gave {type(result).__name__}")
        return
    if isinstance(into, np.ndarray) and result is not into:
        failures.append(f"{label}: the sum is not in the array passed as out")
        return
    if isinstance(result, SparseVector):
        if result.size != size or result.dtype != dtype:
            failures.append(f"{label}: size/dtype {result.size}/{result.dtype}")
            return
        if result.nnz and not np.all(np.diff(result.indices.astype(np.int64)) > 0):
            failures.append(f"{label}: indices not sorted and unique")
        got = result.to_dense()
    else:
        got = result
    if got.dtype != dtype or got.shape != (size,):
        failures.append(f"{label}: dtype/shape {got.dtype}/{got.shape}")
        return
    if integer_values:
        ok = np.array_equal(got, reference)
    else:
        ok = np.all(np.abs(got - reference) <= RTOL[dtype] * magnitude)
    if not ok:
        worst = np.argmax(np.abs(got - reference))
        failures.append(f"{label}: at {worst} got {got[worst]} expected {reference[worst]}")
    # every rank must hold bitwise the same result
    first = got.copy()
    comm.Bcast(first, root=0)
    if not np.array_equal(first.view(np.uint8), got.view(np.uint8)):
        failures.append(f"{label}: differs from rank 0's result")
    if P > 1 and algorithm != "auto" and stats.bytes_sent <= 0:
        failures.append(f"{label}: stats counted no bytes")
    if stats.calls != 1 or stats.algorithm not in collectives.ALGORITHMS:
        failures.append(f"{label}: stats {stats}")


ALGORITHMS = [*collectives.ALGORITHMS, "auto"]
KINDS = [
    "empty",
    "empty_on_even",
    "one_element_on_rank0",
    "one_element_each",
    "disjoint",
    "identical",
    "random_0.001",
    "random_0.01",
    "random_0.1",
    "random_0.5",
    "dense",
    "boundaries",
]
SIZES = [4 * P - 1, 4 * P, 4 * P + 1, 1000, 4099]
DTYPES = (np.float64, np.float32) if P <= 4 else (np.float64,)  # float32: as on 1 to 4 ranks

for dtype in DTYPES:
    for algorithm in ALGORITHMS:
        for size in SIZES:
            for kind in KINDS:
                check(kind, size, dtype, algorithm, "auto")
        for out in ("sparse", "dense"):
            check("random_0.1", 1000, dtype, algorithm, out)
        check("random_0.1", 1000, dtype, algorithm, "auto", as_dense=True)
        for kind in ("random_0.1", "empty"):
            check(kind, 1000, dtype, algorithm, "into")
            check(kind, 1000, dtype, algorithm, "into", as_dense=True)
            check(kind, 1000, dtype, algorithm, "in_place", as_dense=True)
        check("random_0.5", 1000, dtype, algorithm, "auto", integer_values=True)
        for size in (1, max(1, P - 1)):  # fewer entries than ranks: empty ranges
            check("dense", size, dtype, algorithm, "auto")

# Shrunk thresholds: small vectors reach the dense switch and both ways of reducing a range.
for delta_scale, accumulate in ((0.01, 0.125), (0.01, 0.0), (1.0, 0.0), (1.0, 1e9)):
    thresholds.DELTA_SCALE, thresholds.ACCUMULATE_FRACTION = delta_scale, accumulate
    for dtype in DTYPES:
        for algorithm in ("ssar_split_allgather", "dsar_split_allgather"):
            for kind in ("random_0.01", "random_0.1", "empty_on_even", "boundaries", "dense"):
                for size in (4 * P - 1, 4 * P + 1, 1000):
                    for out in ("auto", "sparse", "dense"):
                        check(kind, size, dtype, algorithm, out)
thresholds.DELTA_SCALE, thresholds.ACCUMULATE_FRACTION = 1.0, 0.125

# Index lists as bitmaps wherever they are shorter, and never: the same sums.
for bitmap in ("bitmap", "list"):
    thresholds.BITMAP = bitmap
    for algorithm in ("ssar_recursive_double", "ssar_split_allgather", "dsar_split_allgather"):
        for kind in ("random_0.1", "random_0.5", "empty_on_even", "boundaries", "dense"):
            for size in (4 * P + 1, 4099):
                check(kind, size, DTYPES[-1], algorithm, "auto")
thresholds.BITMAP = "auto"

# The bitmaps are really sent: fewer bytes than the lists, for a sum half dense.
sent = {}
for bitmap in ("bitmap", "list"):
    thresholds.BITMAP = bitmap
    for algorithm in ("ssar_recursive_double", "ssar_split_allgather"):
        indices = np.sort(rng_for("bytes").choice(4099, 2000, replace=False))
        stats = collectives.Stats()
        allreduce(SparseVector(indices, np.ones(indices.size), 4099), comm, algorithm=algorithm,
                  stats=stats)  # fmt: skip
        sent[bitmap, algorithm] = stats.bytes_sent
thresholds.BITMAP = "auto"
for algorithm in ("ssar_recursive_double", "ssar_split_allgather"):
    if P > 1 and not sent["bitmap", algorithm] < 0.8 * sent["list", algorithm]:
        failures.append(f"{algorithm}: bitmaps sent {sent['bitmap', algorithm]} bytes, lists "
                        f"{sent['list', algorithm]}")  # fmt: skip

# The dense switch is really taken: with a shrunk delta, dsar returns a dense ndarray.
thresholds.DELTA_SCALE = 0.01
indices = np.arange(rank, 1000, 7)
switched = allreduce(
    SparseVector(indices, np.ones(indices.size), 1000), comm, algorithm="dsar_split_allgather"
)
thresholds.DELTA_SCALE = 1.0
if not isinstance(switched, np.ndarray):
    failures.append("dsar with a shrunk delta did not switch to dense")

for line in failures:
    print("FAIL", line)
print("cases", cases)
all_failures = comm.allreduce(len(failures))
sys.exit(1 if all_failures else 0)
