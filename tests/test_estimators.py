"""The estimators in this process: accuracy against scikit-learn, inputs, errors, options."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import sparse
from local_sgd_reference import sparse_problem
from mpi4py import MPI
from scipy.special import expit
from sklearn.datasets import load_svmlight_file, make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier, SGDRegressor
from testdata import LIBSVM, needs_a9a

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.datasets import make_url_like
from sparcml_apps.estimators import FitTask
from sparcml_apps.training import holdout

SEEDS = range(10)


@pytest.fixture(scope="module")
def a9a():
    X, y = load_svmlight_file(LIBSVM / "a9a", n_features=123)
    Xt, yt = load_svmlight_file(LIBSVM / "a9a.t", n_features=123)
    return X, y, Xt, yt


def int32_indices(X):
    X = X.copy()
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


@needs_a9a
@pytest.mark.parametrize(("loss", "figure"), [("log_loss", 0.847), ("hinge", 0.844)])
def test_a9a_accuracy_matches_scikit_learn(a9a, loss, figure):
    X, y, Xt, yt = a9a
    ours = [SparseSGDClassifier(loss=loss, random_state=s).fit(X, y).score(Xt, yt) for s in SEEDS]
    theirs = [
        SGDClassifier(loss=loss, random_state=s).fit(int32_indices(X), y).score(Xt, yt)
        for s in SEEDS
    ]
    # a single SGD run varies by about half a point with the seed: compare the means
    assert np.mean(ours) >= np.mean(theirs) - 0.0025, (ours, theirs)
    averaged = SparseSGDClassifier(loss=loss, average=True, random_state=0).fit(X, y)
    assert averaged.score(Xt, yt) >= figure + 0.002


@needs_a9a
def test_topk_with_error_feedback_keeps_a9a_accuracy(a9a):
    X, y, Xt, yt = a9a

    def mean_accuracy(**options):
        return np.mean(
            [
                SparseSGDClassifier(
                    loss="log_loss", batch_size=16, max_iter=5, tol=None, random_state=s, **options
                )
                .fit(X, y)
                .score(Xt, yt)
                for s in range(2)  # the seeds differ by less than 0.001
            ]
        )

    exact = mean_accuracy()
    # 1% of 123 weights: one weight a step of 16 rows, exchanged every step
    with_feedback = mean_accuracy(compression="topk", topk=0.01, local_steps=1)
    without = mean_accuracy(compression="topk", topk=0.01, error_feedback=False, local_steps=1)
    assert with_feedback >= exact - 0.005
    assert without < with_feedback - 0.005


def test_topk_with_error_feedback_keeps_url_like_accuracy():
    # url's statistics on 200,000 columns: 1% of the weights is fewer than a step touches
    X, y = make_url_like(60_000, n_features=200_000, random_state=0)
    X, y, Xt, yt = X[:50_000], y[:50_000], X[50_000:], y[50_000:]
    options = dict(loss="log_loss", batch_size=128, max_iter=5, tol=None, random_state=0)
    exact = SparseSGDClassifier(**options).fit(X, y).score(Xt, yt)
    topk = SparseSGDClassifier(compression="topk", topk=0.01, local_steps=1, **options)
    topk.fit(X, y)
    for record in topk.comm_stats_:
        assert record["sent_entries"] < 0.5 * record["step_entries"]
    assert topk.score(Xt, yt) >= exact - 0.005


@pytest.mark.parametrize(
    ("estimator", "n_classes", "options"),
    [
        (SparseSGDClassifier, 2, {}),
        (SparseSGDClassifier, 3, {"overlap": True, "quantization_bits": 4}),
        (SparseSGDClassifier, 2, {"error_feedback": False, "topk": 0.02}),
        (SparseSGDRegressor, 2, {"loss": "huber", "batch_size": 5}),
    ],
)
def test_diagnostics_record_gamma_and_xi_and_change_nothing_else(estimator, n_classes, options):
    X, y = sparse_problem(n_classes=n_classes)
    options = (
        dict(compression="topk", topk=6, batch_size=12, max_iter=3, tol=None, random_state=0)
        | {"local_steps": 1}
        | options
    )
    plain = estimator(**options).fit(X, y)
    callback_records = []
    watched = estimator(
        diagnostics=True, callback=lambda est, record: callback_records.append(record), **options
    ).fit(X, y)
    assert watched.coef_.tobytes() == plain.coef_.tobytes()
    assert watched.intercept_.tobytes() == plain.intercept_.tobytes()
    assert callback_records == watched.comm_stats_
    assert len(watched.comm_stats_) == 3
    for record, without in zip(watched.comm_stats_, plain.comm_stats_, strict=True):
        assert without["gamma"] is None and without["xi"] is None
        assert len(record["gamma"]) == len(record["xi"]) == record["exchanges"]
        assert record["exchanges"] == -(-record["steps"] // record["local_steps"])
        # 0 for a step without gradient (hinge, every margin past 1) and nothing kept back
        assert all(0 <= gamma < 1 for gamma in record["gamma"])
        assert np.median(record["gamma"]) > 0.3  # TopK really drops entries
        assert all(0 <= xi <= 1e-15 for xi in record["xi"])  # one rank: TopK of the sum
        # the diagnostics' own allreduce is not counted in the exchanges' traffic
        assert record["allreduce_calls"] == without["allreduce_calls"] == record["exchanges"]


def test_same_seed_same_model_bit_for_bit():
    X, y = make_classification(n_samples=500, n_features=30, random_state=0)
    for options in ({}, {"compression": "topk", "topk": 0.2}, {"average": True}):
        first = SparseSGDClassifier(random_state=3, **options).fit(X, y)
        again = SparseSGDClassifier(random_state=3, **options).fit(X, y)
        other = SparseSGDClassifier(random_state=4, **options).fit(X, y)
        assert first.coef_.tobytes() == again.coef_.tobytes()
        assert first.intercept_.tobytes() == again.intercept_.tobytes()
        assert first.coef_.tobytes() != other.coef_.tobytes()


def test_every_input_format_gives_the_same_model():
    X, y = make_classification(n_samples=300, n_features=20, random_state=1)
    X[np.abs(X) < 1] = 0
    csr = sp.csr_matrix(X)
    wide = csr.copy()
    wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
    forms = [csr, wide, csr.tocsc(), csr.tocoo(), sparse.COO.from_scipy_sparse(csr),
             sparse.GCXS.from_scipy_sparse(csr)]  # fmt: skip
    coefs = [SparseSGDClassifier(random_state=0).fit(f, y).coef_.tobytes() for f in forms]
    assert len(set(coefs)) == 1
    model = SparseSGDClassifier(random_state=0).fit(csr, y)
    np.testing.assert_array_equal(model.predict(wide), model.predict(X))
    # scikit-learn's own SGD refuses the int64 indices its svmlight loader produces
    with pytest.raises(ValueError, match="32-bit integer indices"):
        SGDClassifier().fit(wide, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_and_float64(dtype):
    X, y = make_classification(n_samples=400, n_features=20, random_state=2)
    model = SparseSGDClassifier(random_state=0).fit(sp.csr_matrix(X.astype(dtype)), y)
    assert model.score(X, y) > 0.8
    assert model.coef_.dtype == model.intercept_.dtype == dtype  # as scikit-learn's


def test_multiclass_one_vs_rest_in_one_vector():
    X, y = make_classification(
        n_samples=1500, n_features=30, n_informative=12, n_classes=4, random_state=0
    )
    train, test = slice(0, 1000), slice(1000, None)
    ours = SparseSGDClassifier(loss="log_loss", random_state=0).fit(X[train], y[train])
    theirs = SGDClassifier(loss="log_loss", random_state=0).fit(X[train], y[train])
    assert ours.coef_.shape == (4, 30) and ours.intercept_.shape == (4,)
    assert ours.score(X[test], y[test]) >= theirs.score(X[test], y[test]) - 0.03
    proba = ours.predict_proba(X[test])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    expected = expit(ours.decision_function(X[test]))
    np.testing.assert_allclose(proba, expected / expected.sum(axis=1, keepdims=True))


def test_string_labels_and_binary_probabilities():
    X, y = make_classification(n_samples=400, n_features=10, random_state=3)
    labels = np.array(["spam", "ham"])[y]
    model = SparseSGDClassifier(loss="log_loss", random_state=0).fit(X, labels)
    assert list(model.classes_) == ["ham", "spam"]
    scores = model.decision_function(X)
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], expit(scores))
    np.testing.assert_array_equal(model.predict(X), np.where(scores > 0, "spam", "ham"))
    huber = SparseSGDClassifier(loss="modified_huber", random_state=0).fit(X, labels)
    np.testing.assert_allclose(
        huber.predict_proba(X)[:, 1], (np.clip(huber.decision_function(X), -1, 1) + 1) / 2
    )
    with pytest.raises(AttributeError, match="has no attribute 'predict_proba'") as error:
        SparseSGDClassifier().fit(X, labels).predict_proba(X)
    assert "not available for loss='hinge'" in str(error.value.__cause__)


@pytest.mark.parametrize("loss", sorted(SGDRegressor.loss_functions))
def test_regressor_matches_scikit_learn(loss):
    X, y = make_regression(n_samples=2000, n_features=20, noise=5.0, random_state=0)
    y = y / y.std()
    ours = SparseSGDRegressor(loss=loss, random_state=0).fit(X[:1500], y[:1500])
    theirs = SGDRegressor(loss=loss, random_state=0).fit(X[:1500], y[:1500])
    assert ours.score(X[1500:], y[1500:]) >= theirs.score(X[1500:], y[1500:]) - 0.02


def test_l1_zeroes_weights_that_l2_keeps():
    X, y = make_classification(
        n_samples=1000, n_features=50, n_informative=5, n_redundant=0, random_state=0
    )
    l1 = SparseSGDClassifier(penalty="l1", alpha=0.01, random_state=0).fit(X, y)
    l2 = SparseSGDClassifier(penalty="l2", alpha=0.01, random_state=0).fit(X, y)
    assert np.sum(l1.coef_ == 0) >= 20
    assert np.sum(l2.coef_ == 0) == 0
    l1.sparsify()
    assert sp.issparse(l1.coef_)
    np.testing.assert_array_equal(l1.predict(X), l1.densify().predict(X))


def test_partial_fit_epochs_equal_fit_epochs():
    X, y = make_classification(n_samples=300, n_features=10, random_state=0)
    fitted = SparseSGDClassifier(max_iter=3, tol=None, random_state=0).fit(X, y)
    stepped = SparseSGDClassifier(random_state=0)
    for _ in range(3):
        stepped.partial_fit(X, y, classes=np.unique(y))
    assert fitted.coef_.tobytes() == stepped.coef_.tobytes()
    assert fitted.t_ == stepped.t_ == 3 * 300 + 1


def test_comm_stats_and_verbose(capsys):
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    model = SparseSGDClassifier(max_iter=4, tol=None, verbose=1).fit(X, y)
    assert [record["epoch"] for record in model.comm_stats_] == [1, 2, 3, 4]
    assert all(record["rows"] == 200 and record["loss"] > 0 for record in model.comm_stats_)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[0].startswith("-- Epoch 1: loss")


def test_early_stopping_uses_a_validation_score():
    X, y = make_classification(n_samples=2000, n_features=20, random_state=0)
    model = SparseSGDClassifier(early_stopping=True, random_state=0).fit(X, y)
    scores = [record["validation_score"] for record in model.comm_stats_]
    assert all(0.5 < score <= 1 for score in scores)
    assert model.n_iter_ < 1000


def first_stop(measures, tol=1e-3, n_iter_no_change=5):
    """The epoch the stopping rule ends at, for these per-epoch measures."""
    best, worse = np.inf, 0
    for epoch, measure in enumerate(measures, start=1):
        worse = worse + 1 if measure > best - tol else 0
        best = min(best, measure)
        if worse >= n_iter_no_change:
            return epoch
    return len(measures)


@pytest.mark.parametrize(("penalty", "l1_ratio"), [("l2", 0.0), ("elasticnet", 0.15)])
def test_tol_stops_on_the_objective_the_steps_minimize(penalty, l1_ratio):
    # one class weighs ten times the other: the loss stops improving long before its sum
    # with the penalty of the (shrinking) weights does, which the steps minimize
    X, y = make_classification(n_samples=200, n_features=10, random_state=0)
    options = dict(
        alpha=0.001, penalty=penalty, l1_ratio=l1_ratio, class_weight={0: 10, 1: 1},
        average=False, max_iter=300, random_state=0,
    )  # fmt: skip
    epochs = []
    SparseSGDClassifier(tol=None, callback=lambda model, record: epochs.append(
        (record["loss"], model.coef_.ravel().copy())), **options).fit(X, y)  # fmt: skip
    alpha = options["alpha"]
    objective = [
        loss + alpha * ((1 - l1_ratio) / 2 * (w @ w) + l1_ratio * np.abs(w).sum())
        for loss, w in epochs
    ]
    stopped = SparseSGDClassifier(**options).fit(X, y)
    assert stopped.n_iter_ == first_stop(objective) < 300
    assert first_stop([loss for loss, _ in epochs]) < stopped.n_iter_ - 10  # loss alone


def held_out_stop(correct, paired, tol=1e-3, errors=2.0, n_iter_no_change=5):
    """The epoch the held-out rule ends at, for the held-out rows' correctness after each
    epoch (epochs x rows): a rise over the last epoch whose rise counted counts when it
    passes ``tol`` and ``errors`` standard errors: of the difference of two scores of
    unrelated models, or of the two models' scores ``paired`` row by row."""
    reference, worse = None, 0
    for epoch, now in enumerate(correct, start=1):
        counts = reference is None
        if not counts:
            rise, n = now.mean() - reference.mean(), now.size
            change = now - reference
            error = np.sqrt(change @ change) / n if paired else np.sqrt(2 * now.var() / n)
            counts = now.mean() >= reference.mean() + tol and rise > errors * error
        reference = now if counts else reference
        worse = 0 if counts else worse + 1
        if worse >= n_iter_no_change:
            return epoch
    return len(correct)


def test_held_out_rises_count_past_the_noise_of_the_rows():
    # 20,000 rows under 20% label noise: the held-out score creeps up an epoch by more
    # than the noise of one model's changes (paired) but less than the rows' own noise
    X, y = make_url_like(
        20_000, n_features=20_000, nnz_per_row=30, random_state=4, planted="dense",
        label_noise=0.2, power_law=1.8,
    )  # fmt: skip
    seed = np.random.RandomState(4).randint(np.iinfo(np.int32).max)  # the fit's own draw
    held = holdout.held_out((y > 0).astype(np.int64), 2, 0.1, seed, MPI.COMM_SELF, most=10_000)
    correct, scores = [], []

    def record(model, epoch):
        correct.append((model.predict(X[held]) == y[held]).astype(float))
        scores.append(epoch["validation_score"])

    fixed = dict(n_iter_no_change=100, max_iter=30, callback=record)
    with pytest.warns(ConvergenceWarning):  # (30 epochs, none of them the last)
        SparseSGDClassifier(random_state=4, **fixed).fit(X, y)
    assert np.allclose([now.mean() for now in correct], scores)  # the rows the fit holds out
    stopped = SparseSGDClassifier(random_state=4).fit(X, y)
    assert stopped.n_iter_ == held_out_stop(correct, paired=False) < 30
    assert held_out_stop(correct, paired=True) > stopped.n_iter_


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda X, y: (np.where(X == X[0, 0], np.nan, X), y), ValueError, "Input X contains NaN"),
        (lambda X, y: (np.where(X == X[0, 0], np.inf, X), y), ValueError, "infinity"),
        (lambda X, y: (X, np.zeros_like(y)), ValueError, "got 1 class"),
        (lambda X, y: (X, np.array(["a", 1] * 50, dtype=object)), ValueError, "Mix of label"),
        (lambda X, y: (X, y + 0.5), ValueError, "Unknown label type"),
    ],
)
def test_bad_data_is_named(change, error, message):
    X, y = make_classification(n_samples=100, n_features=5, random_state=0)
    X, y = change(X, y)
    with pytest.raises(error, match=message):
        SparseSGDClassifier().fit(X, y)


def test_bad_sample_weight_and_predict_width():
    X, y = make_classification(n_samples=100, n_features=5, random_state=0)
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        SparseSGDClassifier().fit(X, y, sample_weight=-np.ones(100))
    model = SparseSGDClassifier().fit(X, y)
    with pytest.raises(
        ValueError, match="X has 4 features, but SparseSGDClassifier is expecting 5"
    ):
        model.predict(X[:, :4])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"alpha": -1}, "The 'alpha' parameter of SparseSGDClassifier must be"),
        ({"batch_size": 0}, "The 'batch_size' parameter of SparseSGDClassifier must be"),
        ({"topk": 1.5}, "The 'topk' parameter of SparseSGDClassifier must be"),
        ({"compression": "qsgd"}, "The 'compression' parameter of SparseSGDClassifier must be"),
        ({"allreduce": "ring"}, "The 'allreduce' parameter of SparseSGDClassifier must be"),
        ({"eta0": 0}, r"The 'eta0' parameter of SparseSGDClassifier must be .* \(0.0, inf\)"),
        ({"alpha": 0}, "'alpha' parameter .* must be > 0 with learning_rate='optimal'"),
        ({"comm": "world"}, "The 'comm' parameter of SparseSGDClassifier must be"),
        ({"diagnostics": "yes"}, "The 'diagnostics' parameter of SparseSGDClassifier must be"),
        (
            {"diagnostics": True},
            r"The 'diagnostics' parameter of SparseSGDClassifier needs compression='topk' "
            r".*Got diagnostics=True with compression=None instead",
        ),
    ],
)
def test_bad_parameters_are_named(params, message):
    X, y = make_classification(n_samples=50, n_features=5, random_state=0)
    with pytest.raises(ValueError, match=message):
        SparseSGDClassifier(**params).fit(X, y)


def test_comm_and_n_jobs_together_are_refused():
    from mpi4py import MPI

    X, y = make_classification(n_samples=50, n_features=5, random_state=0)
    with pytest.raises(ValueError, match="either on the ranks of 'comm' or on 'n_jobs'"):
        SparseSGDClassifier(comm=MPI.COMM_SELF, n_jobs=2).fit(X, y)


@pytest.mark.parametrize("options", [{"average": True, "penalty": "l1"}, {"compression": "topk"}])
def test_the_plain_fitted_state_goes_on_training_alike(options):
    # what a Dask worker sends back: the training state as a dict of arrays
    X, y = make_url_like(3000, 5000, random_state=0)
    common = {"random_state": 0, "max_iter": 2, "tol": None, **options}
    model = SparseSGDClassifier(**common).fit(X, y)
    state = FitTask(model, "fit", {}).fitted_state(plain=True)
    assert all(isinstance(v, np.ndarray) for v in state["_weights"].values())
    copy = SparseSGDClassifier(**common)
    FitTask(copy, "fit", {}).take(pickle.loads(pickle.dumps(state)))
    assert copy.coef_.tobytes() == model.coef_.tobytes()
    for estimator in (model, copy):
        estimator.partial_fit(X, y)
    assert copy.coef_.tobytes() == model.coef_.tobytes()
    assert copy.intercept_.tobytes() == model.intercept_.tobytes()


def test_a_pickled_model_keeps_its_weights_beside_their_offsets_and_goes_on_alike():
    # with averaging, the weights and their offsets are the two columns of one array:
    # pickled as that array, not as two copies, and unpickled as its columns again
    X, y = make_url_like(3000, 5000, random_state=0)
    model = SparseSGDClassifier(random_state=0, max_iter=2, tol=None, average=True).fit(X, y)
    copy = pickle.loads(pickle.dumps(model))
    weights, copied = model._weights, copy._weights
    for state in (weights, copied):
        assert state.v.base is not None and state.v.strides == (16,)
        assert state.offsets.ctypes.data == state.v.ctypes.data + 8
    assert copied.v.tobytes() == weights.v.tobytes()
    assert copied.offsets.tobytes() == weights.offsets.tobytes()
    for estimator in (model, copy):
        estimator.partial_fit(X, y)
    assert copy.coef_.tobytes() == model.coef_.tobytes()
    assert copy.intercept_.tobytes() == model.intercept_.tobytes()
