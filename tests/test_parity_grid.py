"""The estimators against scikit-learn's SGDClassifier and SGDRegressor over a grid of
options: loss x penalty x learning rate x alpha (1 and more included) x average x
class_weight, dense and CSR rows, on a binary and a three-class problem (a regression one
for the regressor). A case fits both with the same options, on the rows in their order
(``shuffle=False``: both take the same steps, so what differs is what the options do, not
the shuffle), and compares what happens: both fit, and sparcml's test score (accuracy,
R2) is at most a little below scikit-learn's; or both raise the same exception type.

The full product is some 20,000 fits; the grid covers every pair of values of any two
options instead (:func:`every_pair`): 54 cases for the classifier, 24 for the regressor,
25 to 40 s on two shared cores. What two options do together shows in some case.
"""

import itertools
import warnings

import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.estimators.options import REGRESSION_LOSSES

pytestmark = pytest.mark.usefixtures("compiled_kernels")

COMMON = {
    "penalty": ["l2", "l1", "elasticnet", None],
    "learning_rate": ["optimal", "constant", "invscaling", "adaptive", "pa1", "pa2"],
    "alpha": [1e-4, 0.0, 1.0, 10.0],
    "average": [False, True, 20],
    "rows": ["dense", "csr"],
}
OPTIONS = {
    "classifier": {
        "loss": sorted(SGDClassifier.loss_functions),
        **COMMON,
        "class_weight": [None, "balanced", {0: 3.0}],
        "problem": ["binary", "three classes"],
    },
    "regressor": {"loss": sorted(REGRESSION_LOSSES), **COMMON},
}
PAIRS = {"classifier": (SparseSGDClassifier, SGDClassifier),
         "regressor": (SparseSGDRegressor, SGDRegressor)}  # fmt: skip
BELOW = 0.05
"""How far below scikit-learn's test score sparcml's may be (three of the 60 test rows)."""


def every_pair(options):
    """Cases (dicts of option values) in which every two values of two options meet.

    In-parameter-order: the product of the two options with the most values, then each
    further option added to every case with the value that meets the most pairs not yet
    met, and cases added for the pairs still not met; an option a case leaves open takes
    its first value."""
    names = sorted(options, key=lambda name: -len(options[name]))
    first, second = names[:2]  # values are indices until the end
    cases = [
        {first: i, second: j}
        for i in range(len(options[first]))
        for j in range(len(options[second]))
    ]
    for k, name in enumerate(names[2:], start=2):
        earlier = names[:k]
        unmet = {
            (other, i, j)
            for other in earlier
            for i in range(len(options[other]))
            for j in range(len(options[name]))
        }

        def met(case, j, earlier=earlier):
            return {(o, case[o], j) for o in earlier if case.get(o) is not None}

        for case in cases:
            j = max(range(len(options[name])), key=lambda j, c=case: len(met(c, j) & unmet))
            case[name] = j
            unmet -= met(case, j)
        for other, i, j in sorted(unmet, key=repr):
            open_case = next((c for c in cases if c[name] == j and c.get(other) is None), None)
            if open_case is None:
                cases.append({name: j, other: i})
            else:
                open_case[other] = i
        for case in cases:
            for other in earlier:
                case.setdefault(other, None)
    return [{name: options[name][case[name] or 0] for name in options} for case in cases]


def test_every_pair_of_values_meets_in_some_case():
    options = {"a": [1, 2, 3, 4], "b": ["x", "y", "z"], "c": [None, 0], "d": [{}, 5, 6]}
    cases = every_pair(options)
    for one, other in itertools.combinations(options, 2):
        met = {(repr(case[one]), repr(case[other])) for case in cases}
        assert len(met) == len(options[one]) * len(options[other]), (one, other)
    assert len(cases) < 4 * 3 * 2 * 3  # fewer than the product


def problem(kind, name):
    """Train and test rows, standardized."""
    if kind == "regressor":
        X, y = make_regression(n_samples=240, n_features=8, noise=5.0, random_state=0)
        y = y / y.std()
    else:
        classes = 2 if name == "binary" else 3
        X, y = make_classification(
            n_samples=240, n_features=8, n_informative=5, n_classes=classes, random_state=0
        )
    X = StandardScaler().fit_transform(X)
    return train_test_split(X, y, test_size=0.25, random_state=0)


PROBLEMS = {
    (kind, name): problem(kind, name)
    for kind, name in [
        ("classifier", "binary"),
        ("classifier", "three classes"),
        ("regressor", None),
    ]
}
CASES = [(kind, case) for kind in OPTIONS for case in every_pair(OPTIONS[kind])]


def outcome(make, options, X, y, X_test, y_test):
    """The test score of a fit on the rows in their order, or the type of the exception
    it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence, divergence, deprecation
            model = make(shuffle=False, **options).fit(X, y)
    except Exception as exc:  # noqa: BLE001 - compared between the two libraries
        return type(exc)
    return model.score(X_test, y_test)


@pytest.mark.parametrize(
    ("kind", "case"), CASES, ids=["-".join(map(str, [k, *c.values()])) for k, c in CASES]
)
def test_fits_as_scikit_learn_or_fails_alike(kind, case):
    options = dict(case)
    X, X_test, y, y_test = PROBLEMS[kind, options.pop("problem", None)]
    if options.pop("rows") == "csr":
        X, X_test = sp.csr_matrix(X), sp.csr_matrix(X_test)
    ours, theirs = (outcome(make, options, X, y, X_test, y_test) for make in PAIRS[kind])
    if isinstance(theirs, type) or isinstance(ours, type):
        assert ours is theirs
    else:
        assert ours >= theirs - BELOW, (ours, theirs)
