"""Layers point one way: every import of product code (the packages of PRODUCT; not tests/ or bench/) is read with
`ast`, wherever it is written (at the top, inside a function, under `if TYPE_CHECKING:`), and the test fails on

- an upward import: a module importing a package that is not on a lower level of LAYERS (packages on one level
  import nothing of each other, in either direction);
- a cycle between modules (the modules of the cycle are named).

What counts as an import of module M: `import M`, `from M import name` (or `from P import M` when M is a module of
package P), relative forms resolved. Imports under `if TYPE_CHECKING:` count for the layers (a lower layer that names
an upper layer's type depends on its shape) but not for cycles: they never run, so they cannot leave a module half
initialised for its importer, and two collaborating modules naming each other's types is not a tangle of behaviour.
Not seen: imports by name at run time (`importlib.import_module`, Celery's task names), which is how the bot and
the workers' steps reach the tasks (`common.task_names`) without importing them."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "capture", "common", "golden", "judges", "relmon", "store", "topics", "workers")

# Bottom first. A module may import its own package and the packages of lower levels, nothing else.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("judges",),  # the judges library: nothing of ours
    ("store",),  # settings, channel rules, SQL and the pure rules the SQL applies; the judges' names
    ("capture", "golden"),  # pairing, outcome rules and the conversation log; the golden set's tools and regress
    ("topics",),  # topics and knowledge gaps (the outcome signals' rules are capture's)
    ("common",),  # what the bot and the workers share (the reports show topics)
    ("bot", "workers"),  # the Slack app and the Celery tasks: they reach each other by task name only
    ("relmon",),  # the command and its tools
)


@dataclass(frozen=True)
class Import:
    importer: str  # a module of ours, dotted
    imported: str  # a module of ours, dotted (a package's is its __init__)
    line: int
    type_only: bool = False  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}{' (TYPE_CHECKING)' if self.type_only else ''}"


def find_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of the packages: dotted name -> file (a package's name -> its __init__.py)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _ours(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that importing `name` loads (`store.models.Pair` -> store.models), None when not ours.
    Only that module: the packages above it, whose __init__ Python runs first, are not counted, or every package
    whose __init__ re-exports one of its modules would close a loop with it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of our modules that `module` (at `path`) makes, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> Iterable[str | None]:
        if isinstance(node, ast.Import):
            return (_ours(alias.name, modules) for alias in node.names)
        base = node.module or ""
        if node.level:  # relative: from the importer's package, one level up per dot after the first
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        # `from P import M` imports the module P.M when there is one, else a name of P.
        return (
            _ours(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base, modules)
            for alias in node.names
        )

    def visit(node: ast.AST, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    visit_statement(statement, True)
                for statement in child.orelse:
                    visit_statement(statement, type_only)
            else:
                visit_statement(child, type_only)

    def visit_statement(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in targets(node):
                if target is not None and target != module:
                    found.append(Import(module, target, node.lineno, type_only))
        visit(node, type_only)

    visit(ast.parse(path.read_text(), str(path)), False)
    return list(dict.fromkeys(found))  # one per statement and module (`from M import a, b` imports M once)


def import_graph(root: Path, packages: Iterable[str]) -> list[Import]:
    modules = find_modules(root, packages)
    return [found for module, path in modules.items() for found in imports_of(module, path, modules)]


def upward_imports(imports: Iterable[Import], layers: Sequence[Sequence[str]]) -> list[str]:
    """Each import of another package that is not on a lower level than the importer's."""
    level = {package: number for number, packages in enumerate(layers) for package in packages}
    wrong = []
    for found in imports:
        importer, imported = found.importer.split(".")[0], found.imported.split(".")[0]
        if importer != imported and level[imported] >= level[importer]:
            wrong.append(f"{found}: {imported} is not below {importer}")
    return wrong


@dataclass(frozen=True)
class Cycle:
    modules: tuple[str, ...]  # a group of modules that import each other (a strongly connected component)
    path: tuple[str, ...]  # one cycle through its first module, that module again at the end

    def __str__(self) -> str:
        rest = sorted(set(self.modules) - set(self.path))
        return " -> ".join(self.path) + (f" (in a loop with {', '.join(rest)} too)" if rest else "")


def cycles(imports: Iterable[Import]) -> list[Cycle]:
    """Each group of modules that import each other, found with Tarjan's algorithm, and a cycle through it.
    TYPE_CHECKING imports are left out (see above)."""
    graph: dict[str, set[str]] = {}
    for found in imports:
        if not found.type_only:
            graph.setdefault(found.importer, set()).add(found.imported)
            graph.setdefault(found.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[tuple[str, ...]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:  # `module` is the root of a group: the stack down to it
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            on_stack.difference_update(group)
            if len(group) > 1:
                groups.append(tuple(sorted(group)))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [Cycle(group, _cycle_through(group, graph)) for group in sorted(groups)]


def _cycle_through(group: tuple[str, ...], graph: dict[str, set[str]]) -> tuple[str, ...]:
    """The shortest way from the group's first module back to it, inside the group (breadth first)."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imported in sorted(graph[module] & members):
                if imported == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return (*reversed(path), start)
                if imported not in came_from:
                    came_from[imported] = module
                    following.append(imported)
        frontier = following
    raise AssertionError(f"no way back to {start} in {group}")  # a strongly connected group always has one


@functools.cache
def _product_imports() -> tuple[Import, ...]:
    return tuple(import_graph(ROOT, PRODUCT))


def test_every_product_package_has_one_level() -> None:
    placed = [package for packages in LAYERS for package in packages]
    assert sorted(placed) == sorted(PRODUCT)


def test_no_module_imports_upwards() -> None:
    imports = _product_imports()
    assert len({found.importer for found in imports}) > 100  # the reader sees the code (not an empty graph)
    assert upward_imports(imports, LAYERS) == []


def test_no_modules_import_each_other() -> None:
    imports = _product_imports()
    assert [str(cycle) for cycle in cycles(imports)] == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_reports_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """A synthetic tree, `low` below `high`: low.a imports high.c for a type only (upward; and no cycle, though
    high.c imports low.a) and low.b in a function (a cycle: low.b imports low.a back); high.d imports high.c
    relatively."""
    _write(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from high.c import Thing\n"
                "def later():\n"
                "    from low import b\n"
            ),
            "low/b.py": "import low.a\n",
            "high/__init__.py": "",
            "high/c.py": "from low.a import later\nclass Thing: ...\n",
            "high/d.py": "from . import c\nfrom .c import Thing\n",
        },
    )
    imports = import_graph(tmp_path, ("low", "high"))
    assert imports == [  # package by package as given, their modules in name order, imports in file order
        Import("low.a", "high.c", 3, type_only=True),
        Import("low.a", "low.b", 5),
        Import("low.b", "low.a", 1),
        Import("high.c", "low.a", 1),
        Import("high.d", "high.c", 1),
        Import("high.d", "high.c", 2),
    ]
    layers = (("low",), ("high",))
    assert upward_imports(imports, layers) == ["low.a:3 imports high.c (TYPE_CHECKING): high is not below low"]
    assert [str(cycle) for cycle in cycles(imports)] == ["low.a -> low.b -> low.a"]
    # On one level, neither may import the other.
    assert upward_imports(imports, (("low", "high"),)) == [
        "low.a:3 imports high.c (TYPE_CHECKING): high is not below low",
        "high.c:1 imports low.a: low is not below high",
    ]


def test_a_cycle_is_named_with_every_module_of_its_loop() -> None:
    imports = [Import("m.a", "m.b", 1), Import("m.b", "m.c", 1), Import("m.c", "m.a", 1), Import("m.b", "m.a", 2)]
    assert [str(cycle) for cycle in cycles(imports)] == ["m.a -> m.b -> m.a (in a loop with m.c too)"]


# Steps of the worker that hand each other work only by task name: none imports another's package.
APART = ("workers.judging", "workers.alerts", "workers.pairs")


def test_judging_and_the_alert_path_do_not_reach_into_each_other() -> None:
    def step(module: str) -> str | None:
        return next((part for part in APART if module == part or module.startswith(part + ".")), None)

    crossing = [
        f"{found.importer}:{found.line} imports {found.imported}"
        for found in _product_imports()
        if step(found.importer) and step(found.imported) and step(found.importer) != step(found.imported)
    ]
    assert crossing == []
