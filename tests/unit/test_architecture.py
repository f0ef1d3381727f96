"""The shape the code keeps: one import package, imports that point one way, and no import circle.

Every ``import`` statement in ``kafkalite/`` counts, wherever it stands: at the top, inside a function,
or under ``if TYPE_CHECKING:`` (a circle through type hints still means two modules cannot be read
apart). ``from package import name`` counts as an import of ``package.name`` when that is a module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "kafkalite"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _imports(name: str, path: Path) -> Iterator[str]:
    """The kafkalite modules ``name`` imports (every import statement, anywhere in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # "kafkalite.protocol.errors.ErrorCode" -> the module
                target = target.rpartition(".")[0]
            if target.startswith("kafkalite") and target != name:
                yield target


GRAPH: dict[str, set[str]] = {name: set(_imports(name, path)) for name, path in MODULES.items()}


def _is_in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the groups of modules that import each other, directly or not."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                lowlink[node] = min(lowlink[node], lowlink[successor])
            elif successor in on_stack:
                lowlink[node] = min(lowlink[node], index[successor])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_packages() -> None:
    assert {"kafkalite.protocol.records", "kafkalite.broker.core.cluster", "kafkalite.broker.net"} <= set(GRAPH)
    assert "kafkalite.broker.core.topics" in GRAPH["kafkalite.broker.core.cluster"]


def test_no_import_circle() -> None:
    assert _strongly_connected(GRAPH) == []


def test_the_check_finds_a_circle() -> None:
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(("package", "may_not_import"), [
    ("kafkalite.protocol", ("kafkalite.broker", "kafkalite.client", "kafkalite.cli")),
    ("kafkalite.client", ("kafkalite.broker", "kafkalite.testing", "kafkalite.cli")),
    ("kafkalite.broker", ("kafkalite.client", "kafkalite.testing", "kafkalite.cli")),
    ("kafkalite.broker.core", ("kafkalite.broker.handlers", "kafkalite.broker.net", "kafkalite.broker.server",
                               "kafkalite.broker.gendocs", "kafkalite.broker.admin")),
    ("kafkalite.broker.handlers", ("kafkalite.broker.net", "kafkalite.broker.server", "kafkalite.broker.admin")),
    ("kafkalite.broker.net", ("kafkalite.broker.admin",)),
    ("kafkalite.broker.admin", ("kafkalite.broker.server",)),
    ("kafkalite.broker.core.log", ("kafkalite.broker.core.topics", "kafkalite.broker.core.partition",
                                   "kafkalite.broker.core.group", "kafkalite.broker.core.txn",
                                   "kafkalite.broker.core.cluster", "kafkalite.broker.config")),
])
def test_imports_point_one_way(package: str, may_not_import: tuple[str, ...]) -> None:
    wrong = sorted((module, target) for module, targets in GRAPH.items() if _is_in(module, package)
                   for target in targets if any(_is_in(target, banned) for banned in may_not_import))
    assert wrong == []


def test_protocol_does_no_io() -> None:
    io_modules = ("asyncio", "socket", "selectors", "uvloop")
    for name, path in MODULES.items():
        if not _is_in(name, "kafkalite.protocol") or _is_in(name, "kafkalite.protocol.codegen"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & set(io_modules), name


def test_nothing_below_the_composition_root_imports_it() -> None:
    importers = sorted(module for module, targets in GRAPH.items()
                       if "kafkalite.broker.core.cluster" in targets and _is_in(module, "kafkalite.broker.core"))
    assert importers == []


def test_only_serve_imports_the_broker_and_serve_imports_no_client_command() -> None:
    """``kafkalite serve`` starts without the client commands; the client commands without the broker."""
    serve_targets = GRAPH["kafkalite.cli.serve"]
    assert serve_targets and all(_is_in(target, "kafkalite.broker") or target == "kafkalite.cli.serve_security"
                                 for target in serve_targets), serve_targets
    # --security (imported only then): the fixture's secured-broker settings, nothing of the client commands
    assert GRAPH["kafkalite.cli.serve_security"] <= {"kafkalite.testing.security", "kafkalite.broker.server"}
    wrong = sorted((module, target) for module, targets in GRAPH.items()
                   if _is_in(module, "kafkalite.cli")
                   and module not in ("kafkalite.cli", "kafkalite.cli.serve", "kafkalite.cli.serve_security")
                   for target in targets if _is_in(target, "kafkalite.broker") or target == "kafkalite.cli.serve")
    assert wrong == [("kafkalite.cli.app", "kafkalite.cli.serve")]  # the help entry of serve, run on demand


def test_only_the_http_module_imports_the_http_libraries() -> None:
    """A broker without admin.listener, and a test broker injecting faults, need neither aiohttp nor
    prometheus_client: only the admin endpoint's HTTP server and metrics modules import them."""
    importers = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(module.split(".")[0] in ("aiohttp", "prometheus_client") for module in modules):
                importers.add(name)
    assert importers == {"kafkalite.broker.admin.http", "kafkalite.broker.admin.metrics"}
    server_imports = GRAPH["kafkalite.broker.server"]
    assert "kafkalite.broker.admin.http" not in server_imports
    # inside BrokerServer._bind_admin only; the endpoint imports the HTTP module once the libraries are in
    assert "kafkalite.broker.admin.endpoint" in server_imports
    assert "kafkalite.broker.admin.http" in GRAPH["kafkalite.broker.admin.endpoint"]


def test_installing_adds_one_import_name() -> None:
    """The distribution's packages are ``kafkalite`` and its subpackages, with no top-level module beside it."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["kafkalite*"]
    assert "py-modules" not in setuptools
    root = Path(__file__).resolve().parents[2]
    assert not [path.name for path in root.glob("*.py")]  # nothing at the top that setuptools could pick up
