"""The layout keeps its rules: no module reaches into another's private names (nor into the
estimators' private methods from outside ``sparcml_apps/estimators/``), no module is over
:data:`MOST_LINES` lines, no alias is one letter, and the imports of ``sparcml_apps`` form
no cycle. Read from the source with ``ast``; nothing is imported."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collectives", "sparcml_apps")
MOST_LINES = 600
ESTIMATORS = "sparcml_apps.estimators"


class Module:
    """One source file of the project: its dotted name, whether it is a package's
    ``__init__``, its text and its tree."""

    def __init__(self, path, root=ROOT):
        self.path, self.root = path, root
        parts = list(path.relative_to(root).with_suffix("").parts)
        self.is_package = parts[-1] == "__init__"
        if self.is_package:
            parts.pop()
        self.name = ".".join(parts)
        self.text = path.read_text()
        self.tree = ast.parse(self.text, str(path))

    def __repr__(self):
        return str(self.path.relative_to(self.root))

    def resolve(self, node):
        """The absolute module name an ``ImportFrom`` node imports from."""
        if not node.level:
            return node.module
        base = self.name.split(".")
        if not self.is_package:
            base.pop()
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))


def modules(packages=PACKAGES, root=ROOT):
    found = []
    for package in packages:
        found += [Module(path, root) for path in sorted((root / package).rglob("*.py"))]
    return found


def _is_project(name, packages=PACKAGES):
    return name.split(".")[0] in packages


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imports(module, names):
    """``(line, imported module, name or None)`` for each import of a project module; the
    name is what ``from X import name`` takes from X when it is not a module itself."""
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name in names]
        elif isinstance(node, ast.ImportFrom):
            source = module.resolve(node)
            if source not in names:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in names:
                    found.append((node.lineno, sub, None))
                else:
                    found.append((node.lineno, source, alias.name))
    return found


def module_aliases(module, names):
    """The local names bound to project modules by this module's imports."""
    bound = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in names:
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = module.resolve(node)
            for alias in node.names:
                if f"{source}.{alias.name}" in names:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    return bound


def private_imports(found):
    """``from .x import _y`` where ``_y`` is not a module: 'file:line: ...' lines."""
    names = {m.name for m in found}
    bad = []
    for module in found:
        for line, source, name in imports(module, names):
            if name is not None and _private(name) and source != module.name:
                bad.append(f"{module}:{line}: imports the private {name} of {source}")
    return bad


def private_attributes(found):
    """``mod._y`` where ``mod`` is a project module this module imported."""
    names = {m.name for m in found}
    bad = []
    for module in found:
        bound = module_aliases(module, names)
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
                and f"{bound[node.value.id]}.{node.attr}" not in names
            ):
                bad.append(f"{module}:{node.lineno}: reads {node.attr} of {bound[node.value.id]}")
    return bad


def estimator_private_methods(found):
    """The private methods the classes of the estimators' package define."""
    methods = set()
    for module in found:
        if module.name == ESTIMATORS or module.name.startswith(ESTIMATORS + "."):
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef):
                    methods |= {
                        item.name
                        for item in node.body
                        if isinstance(item, ast.FunctionDef) and _private(item.name)
                    }
    return methods


def estimator_private_calls(found, methods):
    """``something._method`` (or ``getattr(something, "_method")``) outside the
    estimators' package, where ``_method`` is one of theirs and ``something`` is not
    ``self`` or ``cls``."""
    bad = []
    for module in found:
        if module.name == ESTIMATORS or module.name.startswith(ESTIMATORS + "."):
            continue
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in methods
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                bad.append(f"{module}:{node.lineno}: calls the estimators' {node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in methods
            ):
                bad.append(f"{module}:{node.lineno}: reaches the estimators' {node.args[1].value}")
    return bad


def long_modules(found, most=MOST_LINES):
    return [
        f"{module}: {n} lines" for module in found if (n := len(module.text.splitlines())) > most
    ]


def one_letter_aliases(found):
    bad = []
    for module in found:
        for node in ast.walk(module.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.asname is not None and len(alias.asname) == 1:
                        bad.append(f"{module}:{node.lineno}: {alias.name} as {alias.asname}")
    return bad


def import_graph(found):
    """``{module: {modules it imports}}`` over the project's modules (imports inside
    functions included: a cycle deferred to run time is still a cycle)."""
    names = {m.name for m in found}
    return {m.name: {source for _, source, _ in imports(m, names)} - {m.name} for m in found}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


PROJECT = modules()


def test_the_modules_are_found():
    names = {m.name for m in PROJECT}
    assert {"collectives", "sparcml_apps", ESTIMATORS} <= names
    assert estimator_private_methods(PROJECT)


def test_no_module_imports_another_modules_private_names():
    assert private_imports(PROJECT) == []


def test_no_module_reads_private_attributes_of_another():
    assert private_attributes(PROJECT) == []


def test_only_the_estimators_call_their_private_methods():
    assert estimator_private_calls(PROJECT, estimator_private_methods(PROJECT)) == []


def test_no_module_is_over_the_limit():
    assert long_modules(PROJECT) == []


def test_no_alias_is_one_letter():
    assert one_letter_aliases(PROJECT + modules(("tests",))) == []


def test_the_imports_of_sparcml_apps_form_no_cycle():
    apps = [module for module in PROJECT if _is_project(module.name, ("sparcml_apps",))]
    assert cycles(import_graph(apps)) == []


# -- each check fails on a violation ---------------------------------------------------

VIOLATIONS = {
    "private_imports": {
        "sparcml_apps/__init__.py": "",
        "sparcml_apps/a.py": "_hidden = 1\n",
        "sparcml_apps/b.py": "from .a import _hidden\n",
    },
    "private_attributes": {
        "sparcml_apps/__init__.py": "",
        "sparcml_apps/a.py": "_hidden = 1\n",
        "sparcml_apps/b.py": "from . import a\n\nprint(a._hidden)\n",
    },
    "estimator_private_calls": {
        "sparcml_apps/__init__.py": "",
        "sparcml_apps/estimators/__init__.py": (
            "class E:\n    def _fit_on(self):\n        return self._fit_on\n"
        ),
        "sparcml_apps/backends/__init__.py": "def fit(estimator):\n    estimator._fit_on()\n",
    },
    "long_modules": {"sparcml_apps/__init__.py": "x = 1\n" * (MOST_LINES + 1)},
    "one_letter_aliases": {"sparcml_apps/__init__.py": "import numpy as N\n"},
    "cycles": {
        "sparcml_apps/__init__.py": "",
        "sparcml_apps/a.py": "from . import b\n",
        "sparcml_apps/b.py": "def f():\n    from .a import g\n",
    },
}


@pytest.mark.parametrize("check", list(VIOLATIONS))
def test_each_check_finds_its_violation(tmp_path, check):
    for name, text in VIOLATIONS[check].items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = modules(("sparcml_apps",), tmp_path)
    seen = {
        "private_imports": lambda: private_imports(found),
        "private_attributes": lambda: private_attributes(found),
        "estimator_private_calls": lambda: estimator_private_calls(
            found, estimator_private_methods(found)
        ),
        "long_modules": lambda: long_modules(found),
        "one_letter_aliases": lambda: one_letter_aliases(found),
        "cycles": lambda: cycles(import_graph(found)),
    }[check]()
    assert seen, check
