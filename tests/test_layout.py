"""The house's layout: modules import each other in one direction (no cycles, module-level imports only), and the
core never imports the built-in plugins by name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "harness": ROOT / "harness",
    "harness.tasks": ROOT / "tasks",
    "harness.trainers": ROOT / "trainers",
    "harness.searchers": ROOT / "searchers",
}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            if "evaluate_modules" in path.parts:  # loaded by path through `evaluate`, not imported
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


def _top_level_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of the project imported when ``path`` is imported (not inside functions or TYPE_CHECKING)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        out |= {n for n in names if n in known}
    return out


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _top_level_imports(path, set(modules)) - {name} for name, path in modules.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert len(graph) > 50  # the walk saw the project, not an empty folder


def test_the_core_imports_no_builtin_plugin():
    """harness/ reaches tasks, trainers and searchers only through the registries (the plugin manager names the
    built-in packages as plugins, the way an entry point names a third-party one)."""
    offenders = []
    for name, path in _modules().items():
        if not name.startswith("harness.") or name.startswith(
            ("harness.tasks", "harness.trainers", "harness.searchers")
        ):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
            if any(n.startswith(("harness.tasks", "harness.trainers", "harness.searchers")) for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_runner_probes_no_plugin():
    """What the runner knows of a plugin it reads from the plugin's declared capabilities (harness/types.py): no
    ``hasattr``, and no ``getattr`` with a default, the form that asks whether an attribute exists."""
    probes = []
    for path in sorted((ROOT / "harness" / "runner").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and (node.func.id == "hasattr" or (node.func.id == "getattr" and len(node.args) > 2))
            ):
                probes.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert probes == []
