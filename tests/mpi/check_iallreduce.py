"""iallreduce against the blocking allreduce: same results, completion in order, errors.

Run under ``mpiexec -n P``. Prints ``FAIL ...`` per failure and ``cases N``; exits 1 on any
failure.
"""

import sys
import time

import numpy as np
from mpi4py import MPI

import collectives
from collectives import RankError, SparseVector, allreduce, check, iallreduce

comm = MPI.COMM_WORLD
P, rank = comm.size, comm.rank
failures = []
cases = 0


def vector(seed, size, density, dtype=np.float64):
    rng = np.random.default_rng([rank, seed])
    k = int(round(density * size))
    indices = np.sort(rng.choice(size, k, replace=False))
    return SparseVector(indices, rng.standard_normal(k).astype(dtype), size)


def same(a, b):
    a = a.to_dense() if isinstance(a, SparseVector) else a
    b = b.to_dense() if isinstance(b, SparseVector) else b
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def expect(label, condition):
    global cases
    cases += 1
    if not condition:
        failures.append(label)


# 1. one request at a time: the blocking result, bit for bit, in every form and precision
for algorithm in [*collectives.ALGORITHMS, "auto"]:
    for size, density in ((4 * P + 1, 0.5), (1000, 0.01), (5000, 0.2), (3000, 1.0)):
        for dtype in (np.float32, np.float64):
            for bits in (None, 4):
                vec = vector(size, size, density, dtype)
                options = dict(algorithm=algorithm, quantization_bits=bits, random_state=5)
                stats = collectives.Stats()
                request = iallreduce(vec, comm, stats=stats, **options)
                got = request.wait()
                expect(f"test after wait {algorithm} {size}", request.test())
                expected = allreduce(vec, comm, **options)
                label = f"{algorithm} size={size} density={density} {dtype.__name__} bits={bits}"
                expect(f"{label}: differs from allreduce", same(got, expected))
                expect(f"{label}: stats {stats}", stats.calls == 1 and stats.seconds > 0)
                for out in ("sparse", "dense"):
                    got = iallreduce(vec, comm, out=out, **options).wait()
                    expected = allreduce(vec, comm, out=out, **options)
                    expect(f"{label} out={out}", same(got, expected))

# 2. many outstanding requests: each gets its own sum; they complete in the order started
vectors = [vector(100 + i, 20000, 0.05 * (i % 3 + 1)) for i in range(12)]
expected = [allreduce(v, comm, algorithm="auto", out="dense") for v in vectors]
requests = [iallreduce(v, comm, out="dense") for v in vectors]
in_order = True
while not requests[-1].test():
    # tested last to first: a request seen done means all before it are done
    done = [r.test() for r in reversed(requests)][::-1]
    in_order = in_order and done == sorted(done, reverse=True)
expect("completed out of order", in_order)
results = [r.wait() for r in requests]
expect("outstanding results", all(same(a, b) for a, b in zip(results, expected, strict=True)))

# 2b. a request completes while the caller computes, making no MPI call of its own
request = iallreduce(vectors[6], comm, out="dense")
time.sleep(1.0)
expect("no progress while the caller computed", request.test())
expect("result after computing", same(request.wait(), expected[6]))

# 3. a blocking call made while requests are pending queues behind them
first = iallreduce(vectors[0], comm, out="dense")
blocking = allreduce(vectors[1], comm, out="dense")
expect("blocking behind pending", same(blocking, expected[1]))
expect("pending before blocking", same(first.wait(), expected[0]))

# 4. the caller's own traffic on comm meanwhile, with tags the collectives also use
request = iallreduce(vectors[2], comm, out="dense")
for tag in range(8):
    mine = np.full(3, rank * 10 + tag, np.int64)
    theirs = np.empty(3, np.int64)
    comm.Sendrecv(mine, (rank + 1) % P, tag, theirs, (rank - 1) % P, tag)
    expect("caller's messages", np.all(theirs == ((rank - 1) % P) * 10 + tag))
total = comm.allreduce(rank)
expect("caller's collective", total == P * (P - 1) // 2)
expect("request next to caller's traffic", same(request.wait(), expected[2]))


# 5. errors: a bad argument on one rank reaches wait() on every rank
def raised(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the type and message are checked
        return exc
    return None


last = P - 1
bad = iallreduce(vectors[3], comm, algorithm="ring" if rank == last else "auto")
error = raised(bad.wait)
if rank == last:
    expect(f"own error: {error!r}", isinstance(error, ValueError) and "ring" in str(error))
else:
    expect(f"others' error: {error!r}", isinstance(error, RankError) and error.rank == last)
bad = iallreduce(vectors[3], comm, quantization_bits=3 if rank == 0 else None)
error = raised(bad.wait)
expect(f"bad bits: {error!r}", error is not None and "quantization_bits" in str(error))

# ... and a rank's failure passed to check() meets the others' pending request
if rank == last:
    error = raised(lambda: check(KeyError("bad row"), comm))
    expect("check on the failing rank", isinstance(error, KeyError))
else:
    error = raised(iallreduce(vectors[4], comm).wait)
    expect(f"pending request meets check: {error!r}", isinstance(error, RankError))

# the communicator still works afterwards
expect("after errors", same(iallreduce(vectors[5], comm, out="dense").wait(), expected[5]))

for line in failures:
    print("FAIL", line)
print("cases", cases)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
