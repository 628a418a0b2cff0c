"""allreduce with quantization_bits against MPI's exact dense Allreduce.

Run under ``mpiexec -n P``. Prints ``FAIL ...`` per failure and ``cases N``; exits 1 on any
failure. Quantized sums are checked for: the same bits on every rank, an error within what
the roundings can add, unbiasedness over many seeds, and the bytes of the dense phase.
"""

import itertools
import sys

import numpy as np
from mpi4py import MPI

import collectives
from collectives import SparseVector, Stats, allreduce, thresholds
from collectives._quantize import levels

comm = MPI.COMM_WORLD
P, rank = comm.size, comm.rank
failures = []
cases = 0


def expect(label, condition):
    global cases
    cases += 1
    if not condition:
        failures.append(label)


def vector(seed, size, density, dtype=np.float64):
    rng = np.random.default_rng([rank, seed])
    k = int(round(density * size))
    indices = np.sort(rng.choice(size, k, replace=False))
    return SparseVector(indices, rng.standard_normal(k).astype(dtype), size)


def exact_sum(vec):
    dense = vec.to_dense()
    total = np.empty_like(dense)
    comm.Allreduce(dense, total)
    return total


def as_dense(result):
    return result.to_dense() if isinstance(result, SparseVector) else result


# 1. every algorithm: one result on all ranks, within the rounding error, dense exact; with
# the index lists as bitmaps wherever they are shorter, too
for bitmap, algorithm in itertools.product(("auto", "bitmap"), [*collectives.ALGORITHMS, "auto"]):
    thresholds.BITMAP = bitmap
    for bits in collectives.BITS:
        for size, density in ((4 * P + 1, 0.5), (2000, 0.05), (3000, 1.0)):
            for dtype in (np.float32, np.float64):
                vec = vector(size, size, density, dtype)
                label = f"{algorithm} {bitmap} bits={bits} size={size} {dtype.__name__}"
                got = as_dense(allreduce(vec, comm, algorithm=algorithm, quantization_bits=bits))
                first = got.copy()
                comm.Bcast(first, root=0)
                expect(f"{label}: differs from rank 0", np.array_equal(first, got))
                expect(f"{label}: dtype {got.dtype}", got.dtype == dtype)
                exact = exact_sum(vec)
                if algorithm == "dense":
                    expect(f"{label}: dense is exact", np.array_equal(got, exact))
                    continue
                # each of at most log2(P) + 3 roundings moves an entry by at most one level
                # of a bucket whose norm is at most the sum of the ranks' largest magnitudes
                largest = comm.allreduce(float(np.abs(vec.values).max(initial=0)))
                bound = (P.bit_length() + 3) * 2 * largest / levels(bits)
                worst = float(np.abs(got - exact).max())
                expect(f"{label}: error {worst} beyond {bound}", P == 1 or worst <= bound)
                if P == 1:
                    expect(
                        f"{label}: one rank sends nothing, rounds nothing",
                        np.array_equal(got, exact),
                    )
thresholds.BITMAP = "auto"

# 2. the same random_state repeats the result; another one changes it
vec = vector(7, 1000, 0.3)
runs = [
    as_dense(
        allreduce(
            vec, comm, algorithm="ssar_split_allgather", quantization_bits=2, random_state=seed
        )
    )
    for seed in (1, 1, 2)
]
expect("same seed, same sum", np.array_equal(runs[0], runs[1]))
expect("other seed, other sum", P == 1 or not np.array_equal(runs[0], runs[2]))

# 3. unbiased: the mean over many seeds is the exact sum, within 3 standard errors
for algorithm in ("ssar_recursive_double", "ssar_split_allgather", "dsar_split_allgather")[
    : 3 * (P > 1)
]:
    thresholds.DELTA_SCALE = 0.05  # dsar's ranges go dense
    vec = vector(11, 64 * P, 0.6)
    exact = exact_sum(vec)
    draws = np.array(
        [
            as_dense(allreduce(vec, comm, algorithm=algorithm, quantization_bits=2, random_state=i))
            for i in range(400)
        ]
    )
    thresholds.DELTA_SCALE = 1.0
    # a rounding that is rarely taken is a skewed draw: a few more than the normal 0.27%
    # of the entries fall beyond 3 standard errors
    spread = draws.std(axis=0, ddof=1)
    rounded = spread > 1e-9 * np.abs(exact)
    z = (draws.mean(axis=0)[rounded] - exact[rounded]) / (spread[rounded] / np.sqrt(len(draws)))
    expect(f"{algorithm}: biased, mean z {z.mean()}", abs(z.mean()) <= 3 / np.sqrt(z.size))
    expect(
        f"{algorithm}: {np.sum(np.abs(z) > 3)} of {z.size} beyond 3 SE",
        np.mean(np.abs(z) > 3) <= 0.05,
    )
    expect(f"{algorithm}: nothing rounded", rounded.sum() > z.size // 2)

# 4. bytes: the dense phase at 4 bits is at most a fifth of float32's
size = 4096 * P
lo, hi = rank * size // P, (rank + 1) * size // P
own_range = SparseVector(
    np.arange(lo, hi), np.random.default_rng(rank).random(hi - lo, np.float32), size
)
sent = {}
for bits in (None, 4):
    stats = Stats()
    result = allreduce(
        own_range, comm, algorithm="dsar_split_allgather", quantization_bits=bits, stats=stats
    )
    expect(f"bits={bits}: the ranges went dense", P == 1 or isinstance(result, np.ndarray))
    sent[bits] = comm.allreduce(stats.bytes_sent, MPI.MAX)
if P > 1:
    print(f"dense phase bytes at 4 bits / float32: {sent[4] / sent[None]:.4f}", flush=True)
    expect(f"bytes {sent[4]} vs {sent[None]}", sent[4] <= 0.2 * sent[None])

for line in failures:
    print("FAIL", line)
print("cases", cases)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
