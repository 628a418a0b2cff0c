"""Training on three ranks against a plain numpy replay of the documented steps: local
steps on every rank's block of rows and the mean of their changes every few steps."""

import numpy as np
import pytest
from local_sgd_reference import reference_fit, sparse_problem
from mpirun import run_mpi

pytestmark = pytest.mark.usefixtures("compiled_kernels")

BOUNDS = [0, 100, 192, 284]  # ranks 1 and 2 run out of rows a step before rank 0
COMMON = dict(
    loss="log_loss", alpha=0.01, learning_rate="constant", eta0=0.05, batch_size=8,
    max_iter=3, tol=None, shuffle=False, exchange_dtype="float64",
)  # fmt: skip
CONFIGS = [
    dict(local_steps=1),
    dict(local_steps=1, list_below=np.inf),
    dict(local_steps=4),
    dict(local_steps=4, list_below=np.inf, penalty="l1", l1_ratio=1.0, average=True),
    dict(local_steps=4, list_below=np.inf, overlap=True),
    dict(local_steps=13),  # one exchange an epoch
    dict(local_steps=4, penalty="elasticnet", l1_ratio=0.5, average=True),
    dict(local_steps=4, overlap=True, penalty="l1", l1_ratio=1.0),
    dict(local_steps=3, batch_size=1, average=40),
    dict(local_steps=3, overlap=True, average=True),
    dict(local_steps=5, regressor=True, loss="squared_error", learning_rate="invscaling"),
    # the default: the changes travel as float32 (the twins of configurations 2 and 1)
    dict(local_steps=4, exchange_dtype="float32"),
    dict(local_steps=1, list_below=np.inf, exchange_dtype="float32"),
    # eta0 * alpha >= 1: every step's L2 shrink is zero (the weights restart from zero),
    # on the copies, the agreed model, the residuals and the changes in flight alike
    dict(local_steps=4, alpha=25.0),
    dict(local_steps=4, alpha=25.0, overlap=True, average=True),
    dict(local_steps=4, alpha=25.0, overlap=True, compression="topk", topk=5),
    # passive-aggressive steps, sized by each row's hinge loss
    dict(local_steps=4, loss="hinge", learning_rate="pa1", eta0=0.5, average=True),
    dict(local_steps=4, loss="hinge", learning_rate="pa2", eta0=0.5, overlap=True),
    # alpha >= 1 with the optimal schedule: the first step's shrink is zero
    dict(local_steps=3, alpha=2.0, learning_rate="optimal", penalty="elasticnet", l1_ratio=0.1),
]
ROUNDED = {11: 2, 12: 1}  # a float32 configuration: its float64 twin


def _start(average):
    """The reference's ``average``: the estimator's, True as 1."""
    return average if average == "auto" else int(average)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    X, y = sparse_problem(n_samples=BOUNDS[-1])
    target = X @ np.linspace(-1, 1, X.shape[1]) + 0.5
    tmp = tmp_path_factory.mktemp("blocks")
    np.savez(
        tmp / "data.npz", data=X.data, indices=X.indices, indptr=X.indptr, shape=X.shape,
        y=y, target=target,
    )  # fmt: skip
    configs = repr([{**COMMON, **config} for config in CONFIGS]).replace("inf", "1e300")
    # the script exits non-zero unless every rank holds the same model, bit for bit
    run_mpi(
        "fit_replayed.py", 3, tmp / "data.npz", tmp / "out.npz", ",".join(map(str, BOUNDS)),
        configs, timeout=180,
    )  # fmt: skip
    return X, y, target, dict(np.load(tmp / "out.npz"))


@pytest.mark.parametrize("number", range(len(CONFIGS)))
def test_three_ranks_follow_a_numpy_replay(fitted, number):
    X, y, target, saved = fitted
    config = {**COMMON, **CONFIGS[number]}
    regressor = config.get("regressor", False)
    labels = target if regressor else y
    blocks = [(X[a:b], labels[a:b]) for a, b in zip(BOUNDS, BOUNDS[1:], strict=False)]
    l1_ratio = {"l2": 0.0, "l1": 1.0, "elasticnet": config.get("l1_ratio", 0.0)}
    w, b, *_ = reference_fit(
        blocks, alpha=config["alpha"], batch=config["batch_size"], epochs=config["max_iter"],
        period=config["local_steps"], l1_ratio=l1_ratio[config.get("penalty", "l2")],
        average=_start(config.get("average", False if regressor else "auto")),
        loss=config["loss"],
        learning_rate=config["learning_rate"], eta0=config["eta0"], power_t=0.25,
        overlap=config.get("overlap", False),
        k=config["topk"] * config["local_steps"] if config.get("compression") else None,
    )  # fmt: skip
    # float32 changes: each rounded to 7 digits, at each of up to 117 exchanges
    rtol, atol = (1e-5, 1e-8) if number in ROUNDED else (1e-9, 1e-13)
    np.testing.assert_allclose(saved[f"coef_{number}"].ravel(), w, rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.ravel(saved[f"intercept_{number}"]), [b], rtol=rtol, atol=atol)
    steps = -(-100 // config["batch_size"])
    exchanges = -(-steps // config["local_steps"])
    assert saved[f"exchanges_{number}"].tolist() == [exchanges] * config["max_iter"]


@pytest.mark.parametrize("number", sorted(ROUNDED))
def test_float32_changes_send_half_the_bytes(fitted, number):
    *_, saved = fitted
    twin = ROUNDED[number]
    rounded, exact = saved[f"bytes_{number}"], saved[f"bytes_{twin}"]
    assert 0.45 * exact < rounded < 0.6 * exact  # the agreement headers are not halved
    assert not np.array_equal(saved[f"coef_{number}"], saved[f"coef_{twin}"])


def test_listing_the_touched_weights_changes_nothing(fitted):
    *_, saved = fitted
    for listed, scanned in ((1, 0),):
        for name in ("coef", "intercept"):
            assert saved[f"{name}_{listed}"].tobytes() == saved[f"{name}_{scanned}"].tobytes()


def test_every_fit_ends_with_each_copy_the_agreed_model_and_keeps_no_second(fitted):
    # what lets a fitted state drop the agreed model (``Weights.drop_agreed``): the next fit
    # copies it again from the weights
    *_, saved = fitted
    assert [bool(saved[f"agreed_at_end_{n}"]) for n in range(len(CONFIGS))] == [True] * len(CONFIGS)
