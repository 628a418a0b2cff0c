"""The docstrings of ``collectives``: their examples run, and the public API has them.

Public: what ``collectives.__all__`` exports (the public functions and classes of the
modules ``cost_model`` and ``thresholds`` among them), the request that ``iallreduce``
returns, and their public methods and properties. Each has a numpydoc docstring: a
one-line summary; ``Parameters`` naming every parameter of its signature and nothing else;
``Returns`` (or ``Yields``) where a function or method returns a value; ``Examples`` for
every function and class. Each public constant of those modules has a docstring under it.
"""

import ast
import doctest
import importlib
import inspect
import pkgutil
import re
import textwrap

import pytest

import collectives

MODULES = ["collectives"] + sorted(
    info.name for info in pkgutil.iter_modules(collectives.__path__, "collectives.")
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _examples(module):
    # globs={}: every docstring imports what its examples use
    return [
        test
        for test in doctest.DocTestFinder().find(module, globs={})
        if test.examples and test.name.split(".")[0] == "collectives"
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


def test_there_are_examples():
    count = sum(
        len(test.examples) for name in MODULES for test in _examples(importlib.import_module(name))
    )
    assert count >= 150


def _public_api():
    """(qualified name, object, kind) of every public function, class, method and property."""
    found = {}

    def add_class(qualname, cls):
        found[qualname] = (cls, "class")
        for name, member in vars(cls).items():
            if name.startswith("_"):
                continue
            if isinstance(member, property):
                found[f"{qualname}.{name}"] = (member.fget, "property")
            elif isinstance(member, staticmethod | classmethod):
                found[f"{qualname}.{name}"] = (member.__func__, "method")
            elif inspect.isfunction(member):
                found[f"{qualname}.{name}"] = (member, "method")

    def add(qualname, obj):
        if inspect.isclass(obj):
            add_class(qualname, obj)
        elif inspect.isfunction(obj):
            found[qualname] = (obj, "function")

    for name in collectives.__all__:
        obj = getattr(collectives, name)
        if inspect.ismodule(obj):
            for member_name, member in vars(obj).items():
                if not member_name.startswith("_") and getattr(member, "__module__", None) == (
                    obj.__name__
                ):
                    add(f"{name}.{member_name}", member)
        else:
            add(name, obj)
    from collectives._nonblocking import Request  # what iallreduce returns

    add("Request", Request)
    return found


PUBLIC = _public_api()


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
        assert name in PUBLIC
    assert len(PUBLIC) >= 35


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_docstring_has_its_sections(name):
    obj, kind = PUBLIC[name]
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
    if kind != "class" and _returns_value(obj):
        assert "Returns" in sections or "Yields" in sections, f"{name}: no Returns"
    if kind in ("class", "function"):
        assert "Examples" in sections, f"{name}: no Examples"
        assert ">>> " in "\n".join(sections["Examples"]), f"{name}: Examples without code"


@pytest.mark.parametrize(
    "name", ["collectives.cost_model", "collectives.thresholds", "collectives._quantize"]
)
def test_public_constants_have_docstrings(name):
    module = importlib.import_module(name)
    body = ast.parse(inspect.getsource(module)).body
    for at, node in enumerate(body):
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", target.id):
                after = body[at + 1] if at + 1 < len(body) else None
                assert (
                    isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ), f"{name}.{target.id} has no docstring"
