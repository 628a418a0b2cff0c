"""TopK diagnostics on three ranks against numpy: from every rank's acc_p and sent_p, and
from a replay of the whole training."""

import numpy as np
import pytest
from local_sgd_reference import gamma_dense, reference_fit, sparse_problem, xi_dense
from mpirun import run_mpi

pytestmark = pytest.mark.usefixtures("compiled_kernels")

BOUNDS = [0, 100, 192, 284]  # ranks 1 and 2 run out of rows a step before rank 0
COMMON = dict(
    loss="log_loss", alpha=0.01, learning_rate="constant", eta0=0.05, batch_size=8,
    max_iter=3, tol=None, compression="topk", topk=8, random_state=0, local_steps=2,
    average=False, exchange_dtype="float64",
)  # fmt: skip
CONFIGS = [
    dict(classes=2, shuffle=False),  # replayed
    dict(classes=2, shuffle=False, overlap=True, error_feedback=False),  # replayed
    dict(classes=2, overlap=True, quantization_bits=4, allreduce="ssar_split_allgather"),
    dict(classes=3, allreduce="ssar_recursive_double"),
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    X, y2 = sparse_problem(n_samples=BOUNDS[-1])
    y3 = (y2 > 0) + (np.asarray(X[:, :10].sum(axis=1)).ravel() > 0)
    tmp = tmp_path_factory.mktemp("diagnostics")
    np.savez(
        tmp / "data.npz", data=X.data, indices=X.indices, indptr=X.indptr, shape=X.shape,
        y2=y2, y3=y3,
    )  # fmt: skip
    configs = repr([{**COMMON, **config} for config in CONFIGS])
    # the script exits non-zero unless diagnostics leave every model the same, bit for bit,
    # and every rank holds the same model and the same diagnostics
    run_mpi(
        "fit_diagnostics.py", 3, tmp / "data.npz", tmp / "out.npz",
        ",".join(map(str, BOUNDS)), configs, timeout=120,
    )  # fmt: skip
    return X, y2, dict(np.load(tmp / "out.npz"))


@pytest.mark.parametrize("number", range(len(CONFIGS)))
def test_gamma_and_xi_follow_from_every_ranks_vectors(recorded, number):
    *_, saved = recorded
    accs, sents = saved[f"acc_{number}"], saved[f"sent_{number}"]  # (exchanges, ranks, n)
    gamma = [
        max(gamma_dense(a, s) for a, s in zip(step_accs, step_sents, strict=True))
        for step_accs, step_sents in zip(accs, sents, strict=True)
    ]
    k = COMMON["topk"] * COMMON["local_steps"]  # topk a step
    xi = [xi_dense(a, s, k) for a, s in zip(accs, sents, strict=True)]
    assert accs.shape[:2] == (3 * 7, 3)  # 13 steps an epoch, exchanges every 2
    np.testing.assert_allclose(saved[f"gamma_{number}"], gamma, rtol=1e-9, atol=0)
    np.testing.assert_allclose(saved[f"xi_{number}"], xi, rtol=1e-9, atol=1e-15)
    assert 0.3 < np.median(gamma) and max(gamma) < 1
    assert np.median(xi) > 0.05  # three ranks: the sum of TopKs is not the TopK of the sum


@pytest.mark.parametrize("number", [0, 1])
def test_three_ranks_follow_a_numpy_replay(recorded, number):
    X, y, saved = recorded
    config = CONFIGS[number]
    blocks = [(X[a:b], y[a:b]) for a, b in zip(BOUNDS, BOUNDS[1:], strict=False)]
    w, b, gammas, xis = reference_fit(
        blocks, alpha=COMMON["alpha"], eta0=COMMON["eta0"], batch=COMMON["batch_size"],
        epochs=COMMON["max_iter"], k=COMMON["topk"] * COMMON["local_steps"],
        period=COMMON["local_steps"],
        error_feedback=config.get("error_feedback", True), overlap=config.get("overlap", False),
    )  # fmt: skip
    np.testing.assert_allclose(saved[f"coef_{number}"].ravel(), w, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(saved[f"intercept_{number}"], [b], rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(saved[f"gamma_{number}"], np.concatenate(gammas), rtol=1e-9)
    np.testing.assert_allclose(saved[f"xi_{number}"], np.concatenate(xis), rtol=1e-9, atol=1e-15)
