"""The docstrings of ``collectives`` and of ``sparcml_apps``' public packages
(``datasets``, ``estimators``, ``jobs``, ``cluster`` and the backends' ``fit``): their
examples run, and the public API has them.

Public: what a package's ``__all__`` exports (for ``collectives``, the public functions and
classes of the modules ``cost_model`` and ``thresholds`` among them, and the request that
``iallreduce`` returns; for ``sparcml_apps.backends``, which exports nothing, the ``fit`` of
each backend), and their public methods and properties, those a class inherits from a class
of the same project included (those of scikit-learn's mixins keep scikit-learn's
docstrings). Each has a numpydoc docstring: a one-line summary; ``Parameters`` naming every
parameter of its signature and nothing else; ``Returns`` (or ``Yields``) where a function or
method returns a value; ``Examples`` for every function (in ``collectives`` and
``sparcml_apps.estimators``, every class too; errors need none). Each public constant of the
modules that hold them has a docstring under it, and every constant a package exports is in
one of those modules.

The examples that run are those of every module of a package (all levels), and of a module
that re-exports (``sparcml_apps.jobs``), those of the modules that define what it exports.
"""

import ast
import doctest
import importlib
import inspect
import pkgutil
import re
import textwrap

import pytest

PACKAGES = [
    "collectives",
    "sparcml_apps.datasets",
    "sparcml_apps.estimators",
    "sparcml_apps.jobs",
    "sparcml_apps.cluster",
    "sparcml_apps.backends",
]
MIN_EXAMPLES = {
    "collectives": 150,
    "sparcml_apps.datasets": 150,
    "sparcml_apps.estimators": 120,
    "sparcml_apps.jobs": 45,
    "sparcml_apps.cluster": 12,
    "sparcml_apps.backends": 60,
}
"""The fewest examples (``>>>`` lines) each package's docstrings hold in all."""
EXAMPLES_FOR = {
    "collectives": ("class", "error", "function"),
    "sparcml_apps.datasets": ("function",),
    "sparcml_apps.estimators": ("class", "function"),
    "sparcml_apps.jobs": ("function",),
    "sparcml_apps.cluster": ("function",),
    "sparcml_apps.backends": ("function",),
}
"""The kinds of public objects that must have ``Examples``, by package."""
EXTRA_PUBLIC = {
    "collectives": [("Request", "collectives._nonblocking")],
    "sparcml_apps.backends": [
        (f"{backend}.fit", f"sparcml_apps.backends.{backend}")
        for backend in ("communicator", "dask_cluster", "in_process", "pool")
    ],
}
"""Public objects a package does not export: (name, module that holds it as the name's last
part): what ``iallreduce`` returns; the ``fit`` of each backend."""
CONSTANT_MODULES = {
    "collectives": ["collectives.cost_model", "collectives.thresholds", "collectives._quantize"],
    "sparcml_apps.datasets": [
        "sparcml_apps.datasets._home",
        "sparcml_apps.datasets._synthetic",
        "sparcml_apps.datasets._url_like_file",
    ],
    "sparcml_apps.estimators": ["sparcml_apps.estimators._base"],
    "sparcml_apps.jobs": [],
    "sparcml_apps.cluster": ["sparcml_apps.cluster._bootstrap"],
    "sparcml_apps.backends": [
        "sparcml_apps.backends.dask_cluster",
        "sparcml_apps.backends.pool.limits",
    ],
}
"""The modules whose public constants must have docstrings, by package."""
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules(package):
    """``package`` and its modules, all levels; for a module that is no package, it and the
    modules that define what it exports."""
    top = importlib.import_module(package)
    if not hasattr(top, "__path__"):
        defining = {getattr(top, name).__module__ for name in top.__all__} - {package}
        return [package] + sorted(defining)
    found = pkgutil.walk_packages(top.__path__, f"{package}.")
    return [package] + sorted(info.name for info in found)


MODULES = list(dict.fromkeys(name for package in PACKAGES for name in _modules(package)))
"""Every module whose examples run, once."""


def _examples(module):
    # globs={}: every docstring imports what its examples use
    return [
        test
        for test in doctest.DocTestFinder().find(module, globs={})
        if test.examples
        and (test.name == module.__name__ or test.name.startswith(f"{module.__name__}."))
    ]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    for test in _examples(module):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)


@pytest.mark.parametrize("package", PACKAGES)
def test_there_are_examples(package):
    count = sum(
        len(test.examples)
        for name in _modules(package)
        for test in _examples(importlib.import_module(name))
    )
    assert count >= MIN_EXAMPLES[package]


def _public_api(package):
    """{qualified name: (object, kind)} of every public function, class (or error), method
    and property of ``package``; names begin with the package's."""
    found = {}

    def add_class(qualname, cls):
        found[qualname] = (cls, "error" if issubclass(cls, BaseException) else "class")
        project = cls.__module__.split(".")[0]
        seen = set()
        for klass in cls.__mro__:  # the member that attribute lookup finds
            ours = klass.__module__.split(".")[0] == project
            for name, member in vars(klass).items():
                if name.startswith("_") or name in seen:
                    continue
                seen.add(name)
                if not ours:
                    continue
                if isinstance(member, property):
                    found[f"{qualname}.{name}"] = (member.fget, "property")
                elif isinstance(member, staticmethod | classmethod):
                    found[f"{qualname}.{name}"] = (member.__func__, "method")
                elif inspect.isfunction(member):
                    found[f"{qualname}.{name}"] = (member, "method")
                elif inspect.isfunction(getattr(member, "fn", None)):  # available_if
                    found[f"{qualname}.{name}"] = (member.fn, "method")

    def add(qualname, obj):
        if inspect.isclass(obj):
            add_class(qualname, obj)
        elif inspect.isfunction(obj):
            found[qualname] = (obj, "function")

    top = importlib.import_module(package)
    for name in getattr(top, "__all__", []):
        obj = getattr(top, name)
        if inspect.ismodule(obj):
            for member_name, member in vars(obj).items():
                if not member_name.startswith("_") and getattr(member, "__module__", None) == (
                    obj.__name__
                ):
                    add(f"{package}.{name}.{member_name}", member)
        else:
            add(f"{package}.{name}", obj)
    for name, module in EXTRA_PUBLIC.get(package, []):
        add(f"{package}.{name}", getattr(importlib.import_module(module), name.split(".")[-1]))
    return found


PUBLIC = {
    name: (package, obj, kind)
    for package in PACKAGES
    for name, (obj, kind) in _public_api(package).items()
}


def _sections(doc):
    """The numpydoc sections of a docstring: {title: body lines}; the summary under ''."""
    lines = inspect.cleandoc(doc).splitlines()
    sections, title = {"": []}, ""
    at = 0
    while at < len(lines):
        underline = lines[at + 1].strip() if at + 1 < len(lines) else ""
        if underline and set(underline) == {"-"} and len(underline) == len(lines[at].strip()):
            title = lines[at].strip()
            sections[title] = []
            at += 2
            continue
        sections[title].append(lines[at])
        at += 1
    return sections


def _documented_parameters(lines):
    names = []
    for line in lines:
        if line and not line[0].isspace():
            head = line.split(" : ")[0].strip()
            names += [name.strip() for name in head.split(",")]
    return names


def _signature_parameters(obj, kind):
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    names = []
    for parameter in parameters:
        if parameter.name in ("self", "cls") and kind != "function":
            continue
        stars = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}
        names.append(stars.get(parameter.kind, "") + parameter.name)
    return names


def _returns_value(function):
    """Whether ``function``'s own body (not a nested one) returns a value or yields."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    stack = list(ast.iter_child_nodes(tree.body[0]))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return True
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def test_the_public_api_is_known():
    for name in ("SparseVector.from_dense", "allreduce", "cost_model.predict", "thresholds.delta"):
        assert f"collectives.{name}" in PUBLIC
    assert sum(package == "collectives" for package, _, _ in PUBLIC.values()) >= 35
    for name in ("load", "make_url_like", "Catalog", "ParseError"):
        assert f"sparcml_apps.datasets.{name}" in PUBLIC
    assert sum(package == "sparcml_apps.datasets" for package, _, _ in PUBLIC.values()) >= 24
    for name in (
        "SparseSGDClassifier.fit",
        "SparseSGDClassifier.predict_proba",  # behind scikit-learn's available_if
        "SparseSGDClassifier.densify",  # of the estimators' base class
        "SparseSGDRegressor.sparsify",
        "FitTask.run",
    ):
        assert f"sparcml_apps.estimators.{name}" in PUBLIC
    assert "sparcml_apps.estimators.SparseSGDClassifier.score" not in PUBLIC  # scikit-learn's
    for name in ("jobs.pool", "jobs.Pool.start", "jobs.Pool.pids", "cluster.initialize"):
        assert f"sparcml_apps.{name}" in PUBLIC
    for backend in ("communicator", "dask_cluster", "in_process", "pool"):
        assert f"sparcml_apps.backends.{backend}.fit" in PUBLIC


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_docstring_has_its_sections(name):
    package, obj, kind = PUBLIC[name]
    doc = obj.__doc__
    assert doc, f"{name} has no docstring"
    sections = _sections(doc)
    summary = [line for line in sections[""] if line.strip()]
    assert summary and summary[0].endswith("."), f"{name}: no one-line summary"
    unknown = set(sections) - {
        "",
        "Parameters",
        "Attributes",
        "Returns",
        "Yields",
        "Raises",
        "Warns",
        "See Also",
        "Notes",
        "Examples",
    }
    assert not unknown, f"{name}: unknown sections {sorted(unknown)}"
    if kind == "property":
        return
    expected = _signature_parameters(obj, kind)
    documented = _documented_parameters(sections.get("Parameters", []))
    assert documented == expected, f"{name}: Parameters {documented}, signature {expected}"
    if kind not in ("class", "error") and _returns_value(obj):
        assert "Returns" in sections or "Yields" in sections, f"{name}: no Returns"
    if kind in EXAMPLES_FOR[package]:
        assert "Examples" in sections, f"{name}: no Examples"
    if "Examples" in sections:
        assert ">>> " in "\n".join(sections["Examples"]), f"{name}: Examples without code"


def _assigned(module):
    """The top-level statements of ``module`` and the names each assigns."""
    body = ast.parse(inspect.getsource(module)).body
    for at, node in enumerate(body):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [target.id for target in targets if isinstance(target, ast.Name)]
            yield body, at, names


@pytest.mark.parametrize("package", PACKAGES)
def test_exported_constants_are_checked(package):
    top = importlib.import_module(package)
    constants = {
        name
        for name in getattr(top, "__all__", [])
        if not (inspect.ismodule(obj := getattr(top, name)) or callable(obj))
    }
    checked = {
        name
        for module in CONSTANT_MODULES[package]
        for _, _, names in _assigned(importlib.import_module(module))
        for name in names
    }
    assert constants <= checked, f"{package}: {sorted(constants - checked)} are not checked"


@pytest.mark.parametrize(
    "name", [name for package in PACKAGES for name in CONSTANT_MODULES[package]]
)
def test_public_constants_have_docstrings(name):
    for body, at, names in _assigned(importlib.import_module(name)):
        for target in names:
            if re.fullmatch(r"[A-Z][A-Z0-9_]*", target):
                after = body[at + 1] if at + 1 < len(body) else None
                assert (
                    isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ), f"{name}.{target} has no docstring"
