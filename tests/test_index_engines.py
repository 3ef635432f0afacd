"""The index engines' declared interface (memory.index.IndexEngine): both engine modules
provide every member with its signature, and memory.index calls nothing of an engine that the
interface does not declare, nor declares what it never calls."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType
from typing import Any, get_type_hints

import pytest

from memory import index
from memory.index import IndexEngine
from tests.helpers import ROOT

ENGINES = list(index._ENGINES.values())  # one module per database vendor


def declared_methods() -> dict[str, inspect.Signature]:
    """Each method of the interface, its signature without `self`."""
    methods = {
        name: inspect.signature(member, eval_str=True)
        for name, member in vars(IndexEngine).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
    return {
        name: signature.replace(parameters=list(signature.parameters.values())[1:])
        for name, signature in methods.items()
    }


def declared_members() -> set[str]:
    return {*declared_methods(), *get_type_hints(IndexEngine)}


def mismatches(declared: inspect.Signature, provided: inspect.Signature) -> list[str]:
    """How `provided` fails to accept every call `declared` allows, and to return its type."""
    found = []
    params = provided.parameters
    for name, parameter in declared.parameters.items():
        if name not in params:
            found.append(f"no parameter {name}")
        elif params[name].kind != parameter.kind:
            found.append(
                f"{name} is {params[name].kind.description}, not {parameter.kind.description}"
            )
        elif parameter.annotation is not Any and params[name].annotation != parameter.annotation:
            found.append(f"{name}: {params[name].annotation} is not {parameter.annotation}")
    positional = [p.name for p in params.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    declared_positional = [
        p.name for p in declared.parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD
    ]
    if positional[: len(declared_positional)] != declared_positional:
        found.append(f"positional parameters {positional}, not {declared_positional}")
    found.extend(
        f"{p.name} is required but not declared"
        for p in params.values()
        if p.name not in declared.parameters
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    )
    if provided.return_annotation != declared.return_annotation:
        found.append(f"returns {provided.return_annotation}, not {declared.return_annotation}")
    return found


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_each_engine_provides_every_method_with_its_signature(engine: ModuleType):
    problems = {
        name: mismatches(declared, inspect.signature(getattr(engine, name), eval_str=True))
        for name, declared in declared_methods().items()
        if hasattr(engine, name)
    }
    missing = sorted(set(declared_methods()) - set(dir(engine)))

    assert missing == []
    assert {name: found for name, found in problems.items() if found} == {}


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_each_engine_provides_every_attribute_with_its_type(engine: ModuleType):
    for name, kind in get_type_hints(IndexEngine).items():
        assert isinstance(getattr(engine, name), kind), name


def test_it_tells_what_an_engine_function_does_not_accept_or_return():
    def other(table: str, *, using: str, agent_id: str) -> int: ...

    found = mismatches(declared_methods()["vector_delete"], inspect.signature(other, eval_str=True))

    assert found == [
        "table: <class 'str'> is not <class 'memory.index_schema.VectorTable'>",
        "no parameter row_ids",
        "positional parameters ['table'], not ['table', 'row_ids']",
        "agent_id is required but not declared",
        "returns <class 'int'>, not None",
    ]


def engine_calls() -> set[str]:
    """The attributes memory/index.py reads of an engine: `_engine(...).x`,
    `_ENGINES[...].x`, or `engine.x` of a name bound to `_engine(...)`."""
    tree = ast.parse((ROOT / "memory" / "index.py").read_text())

    def is_engine(node: ast.expr) -> bool:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id == "_engine"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            return node.value.id == "_ENGINES"
        return isinstance(node, ast.Name) and node.id == "engine"

    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_engine(node.value)
    }


def test_the_interface_is_what_memory_index_calls_of_an_engine():
    calls = engine_calls()

    assert "knn" in calls and "EMBEDDING_READ" in calls  # the walk finds both kinds
    assert calls == declared_members()
