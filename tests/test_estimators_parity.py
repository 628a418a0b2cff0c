"""What scikit-learn's SGDClassifier / SGDRegressor check and return, side by side with the
estimators here: shapes of initial weights, classes across calls, dtypes, losses, the
early-stopping split and the parameters where True is not a number."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import (
    load_breast_cancer,
    load_iris,
    load_svmlight_file,
    make_classification,
    make_regression,
)
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.model_selection import StratifiedShuffleSplit, train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from testdata import LIBSVM, needs_a9a

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.training import kernels

PAIRS = {"classifier": (SGDClassifier, SparseSGDClassifier),
         "regressor": (SGDRegressor, SparseSGDRegressor)}  # fmt: skip


def outcome(make, *args, **kwargs):
    """The fitted estimator, or the type of the exception it raised."""
    try:
        return make(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - compared between the two libraries
        return type(exc)


def three_classes():
    return make_classification(
        n_samples=120, n_features=5, n_informative=3, n_classes=3, random_state=0
    )


@pytest.mark.parametrize(
    ("kind", "n_classes", "coef_shape", "intercept_shape"),
    [
        ("classifier", 3, (5, 3), None),  # transposed: refused, not raveled
        ("classifier", 3, (15,), None),
        ("classifier", 3, (3, 5), (2,)),
        ("classifier", 3, (3, 5), (3,)),
        ("classifier", 2, (5, 1), None),  # one column of weights: as good as a row
        ("classifier", 2, (1, 5), (1, 1)),
        ("classifier", 2, (5,), ()),
        ("regressor", 0, (2, 5), None),
        ("regressor", 0, (1, 5), (1,)),
    ],
)
def test_initial_weights_of_the_wrong_shape_are_refused_as_by_scikit_learn(
    kind, n_classes, coef_shape, intercept_shape
):
    X, y = three_classes()
    y = y % 2 if n_classes == 2 else y
    if kind == "regressor":
        X, y = make_regression(n_samples=120, n_features=5, random_state=0)
    theirs_class, ours_class = PAIRS[kind]
    coef_init = np.arange(math.prod(coef_shape), dtype=float).reshape(coef_shape) / 10
    intercept_init = None if intercept_shape is None else np.full(intercept_shape, 0.5)
    options = dict(learning_rate="constant", eta0=1e-12, max_iter=1, tol=None)
    inits = dict(coef_init=coef_init, intercept_init=intercept_init)
    theirs = outcome(theirs_class(**options).fit, X, y, **inits)
    ours = outcome(ours_class(**options).fit, X, y, **inits)
    if isinstance(theirs, type):
        assert ours is theirs is ValueError
        with pytest.raises(ValueError, match="Provided .*_init does not match dataset"):
            ours_class(**options).fit(X, y, **inits)
    else:  # a step of 1e-12 leaves the weights where they started, as scikit-learn's
        assert ours.coef_.shape == theirs.coef_.shape
        np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-6)
        np.testing.assert_allclose(ours.intercept_, theirs.intercept_, atol=1e-6)


def test_partial_fit_keeps_the_classes_of_its_first_call():
    X, y = three_classes()
    for make in (SGDClassifier, SparseSGDClassifier):
        model = make().partial_fit(X, y, classes=[0, 1, 2])
        model.partial_fit(X, y, classes=[2, 0, 1])  # the same set, in any order
        with pytest.raises(ValueError, match="is not the same as on last call to partial_fit"):
            model.partial_fit(X, y, classes=[0, 1, 2, 3])
        with pytest.raises(ValueError, match="classes must be passed on the first call"):
            make().partial_fit(X, y)
        with pytest.raises(ValueError, match="early_stopping should be False with partial_fit"):
            make(early_stopping=True).partial_fit(X, y, classes=[0, 1, 2])


def test_balanced_class_weight_is_refused_by_partial_fit():
    X, y = three_classes()
    for make in (SGDClassifier, SparseSGDClassifier):
        with pytest.raises(
            ValueError, match="class_weight 'balanced' is not supported for partial"
        ):
            make(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 2])
    # scikit-learn lets it pass once fit has set the classes; here it stays refused
    model = SparseSGDClassifier(class_weight="balanced").fit(X, y)
    with pytest.raises(ValueError, match="class_weight 'balanced' is not supported for partial"):
        model.partial_fit(X, y)


@needs_a9a
def test_dict_class_weight_is_the_way_to_balance_partial_fit():
    from sklearn.utils.class_weight import compute_class_weight

    X, y = load_svmlight_file(LIBSVM / "a9a", n_features=123)
    Xt, yt = load_svmlight_file(LIBSVM / "a9a.t", n_features=123)
    classes = np.unique(y)
    weights = compute_class_weight("balanced", classes=classes, y=y)
    balanced = dict(zip(classes, weights, strict=True))
    options = dict(loss="log_loss", average=True, random_state=0)
    stepped = SparseSGDClassifier(class_weight=balanced, **options)
    for _ in range(3):
        for rows in np.array_split(np.arange(X.shape[0]), 8):
            stepped.partial_fit(X[rows], y[rows], classes=classes)
    fitted = SparseSGDClassifier(class_weight="balanced", max_iter=3, tol=None, **options)
    # batches of an eighth of the data, weighted as the whole: the accuracy of fit
    assert abs(stepped.score(Xt, yt) - fitted.fit(X, y).score(Xt, yt)) < 0.01


def test_warm_start_refit_on_other_classes_is_refused():
    X, y = three_classes()
    subset = y < 2
    relabeled = np.where(y == 2, 3, y)
    for make in (SGDClassifier, SparseSGDClassifier):
        model = make(warm_start=True).fit(X, y)
        with pytest.raises(ValueError):
            model.fit(X[subset], y[subset])
    model = SparseSGDClassifier(warm_start=True, random_state=0).fit(X, y)
    assert list(model.fit(X, y).classes_) == [0, 1, 2]  # the same classes: it goes on
    with pytest.raises(ValueError, match=r"classes \[0, 1, 2\], but y holds the classes \[0, 1\]"):
        model.fit(X[subset], y[subset])
    # scikit-learn carries class 2's weights over to class 3 silently; here it is refused
    with pytest.raises(ValueError, match=r"but y holds the classes \[0, 1, 3\]"):
        SparseSGDClassifier(warm_start=True).fit(X, y).fit(X, relabeled)
    assert list(SparseSGDClassifier().fit(X, y).fit(X[subset], y[subset]).classes_) == [0, 1]


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("average", [False, True])
def test_fitted_attributes_have_scikit_learns_dtype_and_shape(kind, dtype, average):
    X, y = make_classification(n_samples=200, n_features=20, random_state=2)
    X = sp.csr_matrix(X.astype(dtype))
    theirs_class, ours_class = PAIRS[kind]
    theirs = theirs_class(average=average, random_state=0).fit(X, y)
    ours = ours_class(average=average, random_state=0).fit(X, y)
    assert ours.coef_.dtype == theirs.coef_.dtype == dtype
    assert ours.coef_.shape == theirs.coef_.shape
    assert ours.intercept_.shape == theirs.intercept_.shape
    # scikit-learn's regressor leaves its intercept in float64; here it follows the data
    assert ours.intercept_.dtype == dtype
    assert ours.predict(X).shape == theirs.predict(X).shape == (200,)
    # training computes in float64 whatever the data's dtype: float32 data, same model
    again = ours_class(average=average, random_state=0).fit(X.astype(np.float64), y)
    np.testing.assert_allclose(ours.coef_, again.coef_.astype(dtype), rtol=1e-4, atol=1e-5)


def scikit_learns_loss(loss):
    """``(p, y) -> (loss, slope)`` of scikit-learn's own SGD loss objects (epsilon 0.3)."""
    functions = {**SGDClassifier.loss_functions, **SGDRegressor.loss_functions}
    make, *args = functions[loss]
    function = make(*([0.3] if "epsilon" in loss or loss == "huber" else args))
    if hasattr(function, "py_loss"):
        return lambda p, y: (function.py_loss(p, y), function.py_dloss(p, y))

    def of_arrays(p, y):  # the common loss module's objects; the binomial takes 0/1 labels
        target = np.array([(y + 1) / 2 if loss == "log_loss" else y])
        value, slope = np.empty(1), np.empty(1)
        function.loss(target, np.array([p]), None, value, 1)
        function.gradient(target, np.array([p]), None, slope, 1)
        return value[0], slope[0]

    return of_arrays


@pytest.mark.parametrize("loss", sorted(kernels.LOSSES))
def test_every_loss_and_slope_is_scikit_learns(loss):
    reference = scikit_learns_loss(loss)
    classification = loss not in SGDRegressor.loss_functions
    for p in np.linspace(-3, 3, 61):
        for y in (-1.0, 1.0) if classification else (-1.0, 1.0, 0.4, 2.5):
            value, slope = kernels.loss_and_slope(kernels.LOSSES[loss], p, y, 0.3)
            want_value, want_slope = reference(p, y)
            assert value == pytest.approx(want_value, rel=1e-12, abs=1e-12), (p, y)
            assert slope == pytest.approx(want_slope, rel=1e-12, abs=1e-12), (p, y)


@pytest.fixture(scope="module")
def two_problems():
    """Train and test rows of a binary problem (standardized breast cancer measurements)
    and of a three-class one."""
    X, y = load_breast_cancer(return_X_y=True)
    cancer = train_test_split(StandardScaler().fit_transform(X), y, test_size=0.3, random_state=0)
    X, y = make_classification(
        n_samples=600, n_features=20, n_informative=8, n_classes=3, random_state=0
    )
    return {
        "binary": cancer,
        "three classes": train_test_split(X, y, test_size=0.3, random_state=0),
    }


@pytest.mark.parametrize("loss", sorted(SGDClassifier.loss_functions))
def test_the_classifier_trains_with_every_loss_to_scikit_learns_accuracy(two_problems, loss):
    # the regression losses fit the +-1 of each class at the regressor's default rate (at
    # the optimal rate squared losses diverge, for scikit-learn as here)
    regression = loss in SGDRegressor.loss_functions
    options = dict(learning_rate="invscaling", eta0=0.01, power_t=0.25) if regression else {}
    for name, (X, X_test, y, y_test) in two_problems.items():
        scores = [
            [make(loss=loss, random_state=seed, **options).fit(X, y).score(X_test, y_test)
             for seed in range(3)]
            for make in (SparseSGDClassifier, SGDClassifier)
        ]  # fmt: skip
        ours, theirs = np.mean(scores, axis=1)
        assert ours >= theirs - 0.02, (name, scores)


@needs_a9a
def test_perceptron_matches_scikit_learn_on_a9a():
    X, y = load_svmlight_file(LIBSVM / "a9a", n_features=123)
    Xt, yt = load_svmlight_file(LIBSVM / "a9a.t", n_features=123)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    # the last iterate of a perceptron swings by points from seed to seed: compare the
    # averaged models, whose accuracy is steady
    seeds = range(4)
    ours = [
        SparseSGDClassifier(loss="perceptron", average=True, random_state=s).fit(X, y)
        for s in seeds
    ]
    theirs = [
        SGDClassifier(loss="perceptron", average=True, random_state=s).fit(X, y) for s in seeds
    ]
    ours_accuracy = np.mean([model.score(Xt, yt) for model in ours])
    theirs_accuracy = np.mean([model.score(Xt, yt) for model in theirs])
    assert ours_accuracy >= theirs_accuracy - 0.002, (ours_accuracy, theirs_accuracy)
    assert not hasattr(ours[0], "predict_proba")
    hinge = SparseSGDClassifier(loss="hinge", average=True, random_state=0).fit(X, y)
    assert hinge.coef_.tobytes() != ours[0].coef_.tobytes()


@pytest.mark.parametrize(("n_rows", "fraction"), [(12, 0.1), (30, 0.1), (301, 0.25)])
def test_early_stopping_holds_out_as_many_rows_of_each_class_as_scikit_learn(n_rows, fraction):
    X, y = make_classification(n_samples=n_rows, n_features=5, weights=[0.3], random_state=0)
    model = SparseSGDClassifier(
        early_stopping=True, validation_fraction=fraction, max_iter=2, tol=None
    ).fit(X, y)
    split = StratifiedShuffleSplit(test_size=fraction, random_state=0)
    train, _ = next(split.split(np.zeros((n_rows, 1)), y))
    assert model.comm_stats_[0]["rows"] == train.size
    SGDClassifier(early_stopping=True, validation_fraction=fraction).fit(X, y)  # works too


def test_early_stopping_names_an_empty_split_as_scikit_learn_does():
    X, y = make_regression(n_samples=1, n_features=3, random_state=0)
    y = np.atleast_1d(y)
    for make in (SGDRegressor, SparseSGDRegressor):
        with pytest.raises(ValueError):
            make(early_stopping=True).fit(X, y)
    with pytest.raises(ValueError, match="Splitting 1 samples into a train set and a validation"):
        SparseSGDRegressor(early_stopping=True).fit(X, y)


@pytest.mark.parametrize("param", ["topk", "batch_size"])
def test_true_is_not_taken_for_one(param):
    X, y = make_classification(n_samples=50, n_features=5, random_state=0)
    with pytest.raises(InvalidParameterError, match=f"The '{param}' parameter .* not a bool"):
        SparseSGDClassifier(compression="topk", **{param: True}).fit(X, y)


@pytest.mark.parametrize(
    ("loss", "alpha", "learning_rate", "penalty"),
    [
        ("hinge", 1.0, "optimal", "l2"),
        ("log_loss", 3.0, "optimal", "elasticnet"),
        ("hinge", 20.0, "invscaling", "l2"),
        ("hinge", 1e5, "constant", "l2"),
        ("hinge", 1e5, "constant", "elasticnet"),
    ],
)
def test_a_step_that_shrinks_the_weights_to_zero_is_scikit_learns(
    loss, alpha, learning_rate, penalty
):
    # eta * alpha >= 1: scikit-learn clamps the step's L2 shrink at zero (the weights
    # restart from zero); rows in order, one a step: the same arithmetic
    X, y = load_iris(return_X_y=True)
    options = dict(
        loss=loss, alpha=alpha, learning_rate=learning_rate, eta0=0.1, penalty=penalty,
        shuffle=False, tol=None, max_iter=6, average=False,
    )  # fmt: skip
    for labels in (y, y == 1):
        with np.errstate(all="raise"):  # nothing divides by zero, nothing overflows
            ours = SparseSGDClassifier(**options).fit(X, labels)
        theirs = SGDClassifier(**options).fit(X, labels)
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-12)


EDGE_VALUES = [
    dict(penalty="l2", l1_ratio=None),  # l1_ratio is read with "elasticnet" only
    dict(penalty="l1", l1_ratio=None),
    dict(penalty=None, l1_ratio=None),
    dict(penalty="elasticnet", l1_ratio=None),
    dict(penalty="elasticnet", l1_ratio=1.5),
    dict(eta0=0.0),  # refused even where the rate does not use it
    dict(eta0=0.0, learning_rate="constant"),
    dict(eta0=-1.0, learning_rate="invscaling"),
    dict(tol=0.0, max_iter=50),
    dict(tol=-1.0),
    dict(average=0),
    dict(average=1),
    dict(average=-3),
    dict(alpha=0.0),
    dict(alpha=0.0, learning_rate="constant"),
    dict(alpha=1.0),
    dict(alpha=1e5, learning_rate="constant", eta0=0.1),
    dict(power_t=-0.5, learning_rate="invscaling"),
    dict(power_t=0.0, learning_rate="invscaling"),
    dict(epsilon=-0.1),
    dict(max_iter=0),
    dict(n_iter_no_change=0),
    dict(validation_fraction=1.0, early_stopping=True),
    dict(learning_rate="pa1"),  # the classifier's default loss, hinge, only
    dict(learning_rate="pa2", loss="epsilon_insensitive"),  # the regressor's only
]


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
@pytest.mark.parametrize("params", EDGE_VALUES, ids=repr)
def test_parameter_values_are_taken_or_refused_as_by_scikit_learn(kind, params):
    if kind == "classifier":
        X, y = three_classes()
    else:
        X, y = make_regression(n_samples=120, n_features=5, random_state=0)
    options = {"max_iter": 5, "tol": None, "random_state": 0, **params}
    results = []
    for make in PAIRS[kind]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append((outcome(make(**options).fit, X, y), {w.category for w in caught}))
    (theirs, their_warnings), (ours, our_warnings) = results
    if isinstance(theirs, type):
        assert ours is theirs  # the same exception type (InvalidParameterError or not)
    else:
        assert not isinstance(ours, type), ours
        assert np.isfinite(ours.coef_).all()
    assert our_warnings == their_warnings


def test_refusals_say_what_scikit_learns_tests_look_for():
    X, y = three_classes()
    with pytest.raises(ValueError, match="l1_ratio must be set when penalty is 'elasticnet'"):
        SparseSGDClassifier(penalty="elasticnet", l1_ratio=None).fit(X, y)
    with pytest.warns(FutureWarning, match="Negative values for `power_t` are deprecated"):
        SparseSGDRegressor(power_t=-0.1, max_iter=5, tol=None).fit(X, y)
    with pytest.raises(ValueError, match="Provided coef_init does not match dataset"):
        SparseSGDClassifier().fit(X, y % 2, coef_init=np.zeros(3))
    with pytest.raises(ValueError, match="Provided intercept_init does not match dataset"):
        SparseSGDClassifier().fit(X, y % 2, intercept_init=np.zeros(3))
    weights = np.zeros(y.size)
    for early_stopping in (False, True):  # the held-out rows' weights are checked first
        message = "validation set are all zero" if early_stopping else "at least one non-zero"
        for make in (SGDClassifier, SparseSGDClassifier):
            with pytest.raises(ValueError, match=message):
                make(early_stopping=early_stopping).fit(X, y, sample_weight=weights)


@pytest.mark.parametrize("learning_rate", ["pa1", "pa2"])
@pytest.mark.parametrize("penalty", [None, "l2"])
def test_passive_aggressive_steps_are_scikit_learns(learning_rate, penalty):
    # each row's step sized by its loss; rows in order, one a step: the same arithmetic
    X, y = load_iris(return_X_y=True)
    X_reg, y_reg = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    options = dict(
        learning_rate=learning_rate, eta0=0.5, penalty=penalty, shuffle=False, tol=None,
        max_iter=4, average=False,
    )  # fmt: skip
    fits = [(SparseSGDClassifier, SGDClassifier, X, labels, {}) for labels in (y, y == 1)]
    fits.append((SparseSGDRegressor, SGDRegressor, X_reg, y_reg, {"loss": "epsilon_insensitive"}))
    for ours_class, theirs_class, X_fit, y_fit, loss in fits:
        ours = ours_class(**options, **loss).fit(X_fit, y_fit)
        theirs = theirs_class(**options, **loss).fit(X_fit, y_fit)
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-12)
