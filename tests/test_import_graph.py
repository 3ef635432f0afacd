"""The import graph of the project's packages has no cycle, and migrations import no live code;
one module owns the sub-agent run record and reads the sub-agent table's layout; no module
or function outgrows a reading (1,000 and 100 lines).

The graph is read from the source with `ast`, not from what Python happened to import: every
import statement counts, those inside functions too (a deferred import hides a cycle, it does
not remove it). docs/ARCHITECTURE.md describes the layering this guards.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("memory", "subagents", "bench", "orca_memory")

Graph = dict[str, set[str]]


def module_name(path: Path, root: Path) -> str:
    """`memory/tasks.py` -> `memory.tasks`; `memory/__init__.py` -> `memory`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    return {
        module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def imported_names(module: str, is_package: bool, source: str) -> set[str]:
    """Every module name the source imports, anywhere in it (functions and branches included).

    `from memory import tasks` names both `memory` and `memory.tasks`: the caller keeps those
    that are modules of the project."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _absolute(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Graph:
    """Edges between the project's modules, from every import statement of each file."""
    modules = project_modules(root, packages)
    graph: Graph = {}
    for name, path in modules.items():
        imported = imported_names(name, path.name == "__init__.py", path.read_text())
        # `from memory import tasks` also runs `memory/__init__.py` first: the edge to the
        # package is real too.
        graph[name] = {target for target in imported if target in modules and target != name}
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module, as a closed path."""
    found = []
    for component in _strongly_connected(graph):
        if len(component) > 1:
            found.append(_cycle_within(graph, component))
    return found


def _strongly_connected(graph: Graph) -> list[set[str]]:
    """Tarjan's algorithm (the graph is a few hundred modules: recursion is fine)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _cycle_within(graph: Graph, component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    next_frontier.append(target)
        frontier = next_frontier
    raise AssertionError(f"{component} is not strongly connected")


# --- the project ------------------------------------------------------------------------------


def test_it_finds_no_import_cycle_in_the_project():
    found = cycles(import_graph())

    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_it_sees_the_project_modules_and_their_imports():
    # The graph is not vacuous: it holds every package and the edges written in each style.
    graph = import_graph()

    assert {"memory.tasks", "subagents.runs", "bench.evaluation", "orca_memory.settings"} <= set(
        graph
    )
    assert "memory.models" in graph["memory.messages"]  # from memory.models import ...
    assert "memory.vectors" in graph["memory.tasks"]  # from memory import vectors
    assert "bench.measure" in graph["bench.evaluation"]  # bench's own modules are read too


def test_it_names_by_path_only_the_tasks_of_memory_tasks():
    # Services queue tasks by the path queued rows store (memory/scheduling.py), the one
    # link between them the graph cannot see: each path must name that task, as it is.
    from memory import scheduling, tasks

    for path in scheduling.TASK_PATHS:
        task_ = scheduling.task_at(path)
        assert task_.module_path == path
        assert getattr(tasks, path.rpartition(".")[2]) is task_


# Entry points: what the framework calls (routes, pages, admin, worker tasks, commands) and
# the project modules that compose the apps. They call services; services never import them.
ENTRY_POINTS = {
    "memory.admin",
    "memory.api",
    "memory.api_archive",
    "memory.api_forget",
    "memory.apps",
    "memory.mcp_server",
    "memory.tasks",
    "memory.templatetags.words",
    "memory.urls",
    "memory.views",
    "memory.views_forget",
    "subagents.admin",
    "subagents.api",
    "subagents.apps",
    "subagents.urls",
    "subagents.views",
    "orca_memory.api",
    "orca_memory.gunicorn_conf",
    "orca_memory.urls",
    "orca_memory.wsgi",
}


def _is_entry_point(module: str) -> bool:
    return module in ENTRY_POINTS or ".management.commands." in module


def test_it_lets_only_entry_points_import_entry_points():
    graph = import_graph()

    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not _is_entry_point(module)
        for target in targets
        if _is_entry_point(target)
    )

    assert not wrong, "services importing entry points:\n" + "\n".join(wrong)


FORMS = {"memory.forms", "subagents.forms"}


def test_it_lets_only_entry_points_import_forms():
    # Forms sit just below the entry points: the pages and the admin use them, no service.
    graph = import_graph()

    assert set(graph) >= FORMS
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not _is_entry_point(module) and module not in FORMS
        for target in targets & FORMS
    )

    assert not wrong, "services importing forms:\n" + "\n".join(wrong)


def _in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_it_keeps_the_memory_app_and_the_project_core_free_of_the_other_apps():
    # `subagents` and `bench` build on `memory`, never the other way; the project's modules
    # other than its wiring (the base `orca_memory.core`, settings and what they name)
    # import no app at all.
    graph = import_graph()
    core = [m for m in graph if _in_package(m, "orca_memory") and not _is_entry_point(m)]
    above_memory = ("subagents", "bench")

    wrong = sorted(
        f"{module} -> {target}"
        for module in [*core, *(m for m in graph if _in_package(m, "memory"))]
        for target in graph[module]
        if any(_in_package(target, app) for app in above_memory)
        or (module in core and _in_package(target, "memory"))
    )

    assert not wrong, "\n".join(wrong)


# `orca_memory` holds both the base the apps build on and the wiring that composes them.
APPS = ("memory", "subagents", "bench")
PROJECT = "orca_memory"
BASE = "orca_memory.core"


def upward_imports(graph: Graph, *, apps: tuple[str, ...], project: str, base: str) -> list[str]:
    """The imports that run back up: an app importing the project other than its base, and
    the base importing anything outside itself (an app, or the wiring). The bare package is
    allowed to both (`from orca_memory import core`): its `__init__` must import nothing."""
    apps_modules = [m for m in graph if any(_in_package(m, app) for app in apps)]
    base_modules = [m for m in graph if _in_package(m, base)]
    wrong = [
        f"{module} -> {target}"
        for module in apps_modules
        for target in graph[module]
        if _in_package(target, project) and not _in_package(target, base) and target != project
    ]
    wrong += [
        f"{module} -> {target}"
        for module in base_modules
        for target in graph[module]
        if not _in_package(target, base) and target != project
    ]
    wrong += [f"{project} -> {target}" for target in graph.get(project, ())]
    return sorted(wrong)


def test_it_lets_the_apps_import_only_the_projects_base_and_the_base_nothing_above_it():
    # The apps import `orca_memory.core` (config, files, errors, pages, db/), never the
    # wiring (settings, api, urls, wsgi, gunicorn_conf, ...), which imports them; the base
    # imports neither: no import runs back up the layering.
    graph = import_graph()

    assert {f"{BASE}.config", f"{BASE}.files", f"{BASE}.errors", f"{BASE}.pages"} <= set(graph)
    assert f"{BASE}.files" in graph["memory.jsonl"]  # the apps do use the base
    assert upward_imports(graph, apps=APPS, project=PROJECT, base=BASE) == []


# Migrations run against the schema of their time: they may import the models (for a choice
# or a default) and field validators, never live code whose change would change them.
MIGRATION_MAY_IMPORT = {
    "memory",  # `from memory import models` runs the package's (empty) __init__ first
    "memory.models",
    "memory.validation",
    "subagents",
    "subagents.models",
}


def test_it_lets_migrations_import_only_models_and_validators():
    graph = import_graph()

    live = {
        (migration, target)
        for migration, targets in graph.items()
        if ".migrations." in migration
        for target in targets
        if target not in MIGRATION_MAY_IMPORT and ".migrations." not in target
    }

    assert live == set()


# One owner per concept: the sub-agent run record (its metadata key, shape, parser and label)
# and the way a main message reaches the sub-agent table are written in one module, a leaf of
# `memory` that both apps import; `memory` never imports `subagents` to read sub-agent runs.
RUN_OWNER = "memory.subagent_run"
LEAVES = {
    "memory",
    "memory.dates",
    "memory.models",
    "memory.outage",
    "memory.remote",
    "memory.text",
    "memory.tokens",
    "memory.validation",
}


def run_layout_readers(path: Path, key: str, relation: str) -> list[str]:
    """Where a file reads the sub-agent run's layout: the metadata key or the sub-agent
    table's relation name, alone or in an ORM lookup path, as a string (`"subagent"`,
    `"subagent_messages__agent_name"`), a lookup's keyword (`metadata__subagent__agent_name=`)
    or an attribute (`message.subagent_messages`). The table's own name (`db_table`) and text
    that only mentions them (docstrings, messages: they have spaces) are not reads."""
    tree = ast.parse(path.read_text())
    table_names = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "db_table" for target in node.targets)
    }

    def names_it(text: str) -> bool:
        parts = text.split("__")
        return not any(c.isspace() for c in text) and (key in parts or relation in parts)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value if id(node) not in table_names else ""
        elif isinstance(node, ast.keyword):
            text = node.arg or ""
        elif isinstance(node, ast.Attribute):
            text = node.attr
        else:
            continue
        if text and names_it(text):
            found.append(f"line {getattr(node, 'lineno', '?')}: {text}")
    return found


def test_it_lets_only_the_run_owner_read_the_subagent_tables_layout():
    from memory.models import MainMessage
    from memory.subagent_run import REPLIES, REPLY_AGENT_NAME, RUN_METADATA_KEY

    # What the owner says of the layout is true: the relation reaches the sub-agent table,
    # whose replies name their sub-agent in that field.
    replies = MainMessage._meta.get_field(REPLIES).related_model
    assert replies._meta.db_table == "subagent_messages"
    replies._meta.get_field(REPLY_AGENT_NAME)  # raises FieldDoesNotExist if it is not one

    modules = project_modules(ROOT)
    wrong = [
        f"{name} {read}"
        for name, path in modules.items()
        if name != RUN_OWNER and ".migrations." not in name
        for read in run_layout_readers(path, RUN_METADATA_KEY, REPLIES)
    ]

    assert not wrong, f"read the sub-agent run's layout outside {RUN_OWNER}:\n" + "\n".join(wrong)


def test_it_keeps_the_run_owner_a_leaf_that_both_apps_import():
    graph = import_graph()

    assert graph[RUN_OWNER] <= LEAVES, graph[RUN_OWNER] - LEAVES
    importers = {module for module, targets in graph.items() if RUN_OWNER in targets}
    assert {"memory.messages", "memory.views", "memory.context"} <= importers
    assert {"subagents.models", "subagents.runs", "subagents.views"} <= importers


# --- the checker itself -------------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_it_names_a_cycle_hidden_in_a_function(tmp_path):
    _write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "from app import b\n",
            "app/b.py": "def later():\n    from app.c import thing\n",
            "app/c.py": "import app.a\n",
            "app/d.py": "from app import a\n",
        },
    )

    found = cycles(import_graph(tmp_path, ("app",)))

    assert found == [["app.a", "app.b", "app.c", "app.a"]]


def test_it_names_the_imports_that_run_back_up_from_the_base_or_an_app(tmp_path):
    _write(
        tmp_path,
        {
            "top/__init__.py": "from top import api\n",
            "top/api.py": "from app import views\n",
            "top/settings.py": "from top.base import config\n",
            "top/base/__init__.py": "",
            "top/base/config.py": "",
            "top/base/pages.py": "from top import settings\nfrom app import models\n",
            "app/__init__.py": "",
            "app/models.py": "from top import base\nfrom top.base.config import x\n",
            "app/views.py": "from top.api import router\n",
        },
    )

    graph = import_graph(tmp_path, ("top", "app"))

    assert upward_imports(graph, apps=("app",), project="top", base="top.base") == [
        "app.views -> top.api",
        "top -> top.api",
        "top.base.pages -> app",
        "top.base.pages -> app.models",
        "top.base.pages -> top.settings",
    ]


def test_it_resolves_relative_imports_and_ignores_names_that_are_not_modules(tmp_path):
    _write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/sub/__init__.py": "from .inner import x\n",
            "app/sub/inner.py": "from .. import top\nfrom app.top import helper\n",
            "app/top.py": "import json\nfrom app.sub import inner\n",
        },
    )

    graph = import_graph(tmp_path, ("app",))

    assert graph["app.sub"] == {"app.sub.inner"}
    assert graph["app.sub.inner"] == {"app", "app.top"}
    assert graph["app.top"] == {"app.sub", "app.sub.inner"}
    assert cycles(graph) == [["app.sub", "app.sub.inner", "app.top", "app.sub"]]


def test_it_finds_every_read_of_the_run_layout_and_no_mention(tmp_path):
    path = tmp_path / "reader.py"
    path.write_text(
        '"""Reads `metadata.subagent` through subagent_messages__agent_name."""\n'
        "class Meta:\n"
        '    db_table = "subagent_messages"\n'
        'run = message.metadata.get("subagent")\n'
        'names = parents.values_list("pk", "subagent_messages__agent_name")\n'
        "started = parents.filter(subagent_messages__isnull=False)\n"
        'done = results.filter(metadata__subagent__agent_name="coder")\n'
        "replies = parent.subagent_messages.all()\n"
        'other = ("subagents", "subagent_run", "metadata__has_key", "subagent_messages_role")\n'
        'raise ValueError("metadata.subagent is reserved")\n'
    )

    found = run_layout_readers(path, "subagent", "subagent_messages")

    assert sorted(found) == [
        "line 4: subagent",
        "line 5: subagent_messages__agent_name",
        "line 6: subagent_messages__isnull",
        "line 7: metadata__subagent__agent_name",
        "line 8: subagent_messages",
    ]


# --- size -----------------------------------------------------------------------------------

# A module a newcomer can read in one sitting, a function on one screen: past these, split by
# concern (docs/ARCHITECTURE.md). Migrations are written once and never read as code.
MAX_MODULE_LINES = 1_000
MAX_FUNCTION_LINES = 100


def test_no_module_or_function_outgrows_a_reading():
    too_long: list[str] = []
    for module, path in project_modules(ROOT).items():
        if ".migrations." in f"{module}.":
            continue
        source = path.read_text("utf-8")
        if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{module}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{module}.{node.name}: {length} lines")
    assert too_long == []
