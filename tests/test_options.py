"""The options are declared once (sparcml_apps.estimators.options): the estimators' signatures,
constraints, docstrings and the training setup all follow the table."""

import dataclasses
import doctest
import inspect
import re

import pytest

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor, training
from sparcml_apps.estimators import _classifier, _regressor, options

ESTIMATORS = {options.CLASSIFIER: SparseSGDClassifier, options.REGRESSOR: SparseSGDRegressor}
DERIVED = {
    "l2", "l1", "n_features", "n_out", "multiclass", "pos_weight", "neg_weight",
    "value_dtype", "seed", "average", "intercept_decay", "classifier", "callback",
    "progress",
}  # fmt: skip
"""Fields of the training setup made from the data or from several options."""


@pytest.mark.parametrize("kind", list(ESTIMATORS))
def test_the_signature_is_the_table(kind):
    parameters = inspect.signature(ESTIMATORS[kind]).parameters
    declared = options.of(kind)
    assert list(parameters) == [option.name for option in declared]
    assert [p.default for p in parameters.values()] == [o.default_of(kind) for o in declared]
    assert list(ESTIMATORS[kind]().get_params()) == sorted(parameters)
    # loss may come first by position, every other option by name only
    assert parameters["loss"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert {p.kind for name, p in parameters.items() if name != "loss"} == {
        inspect.Parameter.KEYWORD_ONLY
    }


def test_the_defaults_that_differ_between_the_estimators():
    classifier, regressor = SparseSGDClassifier(), SparseSGDRegressor()
    assert (classifier.loss, regressor.loss) == ("hinge", "squared_error")
    assert (classifier.learning_rate, regressor.learning_rate) == ("optimal", "invscaling")
    assert (classifier.power_t, regressor.power_t) == (0.5, 0.25)
    assert (classifier.average, regressor.average) == ("auto", False)
    assert hasattr(classifier, "class_weight") and not hasattr(regressor, "class_weight")


def test_init_stores_its_arguments_and_refuses_others():
    model = SparseSGDClassifier("log_loss", alpha=0.5)
    assert (model.loss, model.alpha, model.penalty) == ("log_loss", 0.5, "l2")
    with pytest.raises(TypeError, match=r"SparseSGDRegressor.__init__\(\).*'class_weight'"):
        SparseSGDRegressor(class_weight="balanced")
    with pytest.raises(TypeError, match=r"SparseSGDClassifier.__init__\(\).*positional"):
        SparseSGDClassifier("hinge", "l2")


@pytest.mark.parametrize("kind", list(ESTIMATORS))
def test_the_constraints_are_the_table(kind):
    constraints = ESTIMATORS[kind]._parameter_constraints
    assert list(constraints) == [option.name for option in options.of(kind)]
    (losses,) = [c.options for c in constraints["loss"]]
    if kind == options.REGRESSOR:
        assert losses == set(options.REGRESSION_LOSSES)
    else:
        assert set(options.REGRESSION_LOSSES) < losses and "hinge" in losses


@pytest.mark.parametrize("kind", list(ESTIMATORS))
def test_the_docstring_documents_every_option_in_order(kind):
    doc = ESTIMATORS[kind].__doc__
    section = doc[doc.index("Parameters\n----------\n") : doc.index("Attributes\n")]
    documented = re.findall(r"^(\w+) : (.*)$", section, flags=re.MULTILINE)
    assert [name for name, _ in documented] == [o.name for o in options.of(kind)]
    for (_, kind_line), option in zip(documented, options.of(kind), strict=True):
        assert kind_line == f"{option.kind}, default={option.default_of(kind)!r}"
        assert "default" not in option.kind


def test_the_setup_takes_the_options_the_table_names():
    fields = {field.name for field in dataclasses.fields(training.Setup)}
    fed = {option.setup for option in options.OPTIONS if option.setup is not None}
    assert fed <= fields
    assert fields == fed | DERIVED
    model = SparseSGDClassifier(epsilon=0.25, allreduce="dense", batch_size=3)
    values = options.setup_values(model)
    assert (values["loss_param"], values["algorithm"], values["batch_size"]) == (0.25, "dense", 3)


def test_the_examples_run():
    found = [
        doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        for module in (_classifier, _regressor)
    ]
    assert sum(f.attempted for f in found) >= 8 and sum(f.failed for f in found) == 0
