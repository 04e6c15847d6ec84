"""Test code for the code task: HumanEval's ``check(candidate)`` cut into its asserts, and each test made
self-contained for the sandbox's judge.

Every test the sandbox runs is trusted code of this shape (harness.sandbox: its expected values stay in the judge,
the rest runs in the program's interpreter):

    <setup>                                  # trusted helpers: the prompt's own functions, the test file's imports
    candidate = _vh_program(<target>)        # the function under test: the program's own object
    <one assert, with the setup statements that precede it in check()>

Why each piece: the prompt's helpers are defined again in the test's own namespace, so a program that redefines
``poly`` or ``encode_cyclic`` at its top level cannot make HumanEval/32 or /38 pass; expected values are evaluated by
the judge with its own builtins, so a program's top-level ``def abs`` cannot change them; the candidate's results
are compared there as plain data, so an object whose ``__eq__`` always says True (the best-known reward hack for
assert tests) fails instead of passing, and a Counter equal to the expected dict passes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSplit:
    setup: str  # module-level test code the asserts rely on (imports, METADATA; the whole file when not split)
    tests: list[str]  # one source each, using the name ``candidate``
    split: bool  # False: check() could not be cut, and the one test is "check(candidate)"


def split_check(test_source: str) -> CheckSplit:
    """HumanEval's test file -> one test per top-level statement of ``check`` that calls the candidate, each
    preceded by the statements before it that do not (setup such as ``import math``, ``lst = ...``).

    An assert that involves neither the candidate nor a value computed from it (``assert True, "..."``) is no test
    and is dropped. A loop of asserts stays one test. Falls back to the whole check when it cannot be cut safely:
    no single ``check(candidate)``, or a ``return``/``yield`` that would make later asserts vacuous."""
    whole = CheckSplit(setup=test_source, tests=["check(candidate)"], split=False)
    try:
        module = ast.parse(test_source)
    except SyntaxError:
        return whole
    checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if len(checks) != 1 or [a.arg for a in checks[0].args.args] != ["candidate"] or _leaves_early(checks[0]):
        return whole
    setup = "\n".join(ast.unparse(s) for s in module.body if s is not checks[0])
    tests: list[str] = []
    prefix: list[str] = []
    tainted = {"candidate"}  # names whose value comes from the candidate: an assert on them is a test
    for statement in checks[0].body:
        source = ast.unparse(statement)
        if not any(isinstance(node, ast.Assert) for node in ast.walk(statement)):
            prefix.append(source)  # setup, run again before each later test (x = candidate(5) included)
            if _names(statement) & tainted:
                tainted |= {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
        elif _names(statement) & tainted:
            tests.append("\n".join([*prefix, source]))
    return CheckSplit(setup, tests, True) if tests else whole


def prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's code other than the function to write (imports, helper functions such as encode_cyclic)."""
    try:
        module = ast.parse(prompt)
    except SyntaxError:
        return ""
    kept = [s for s in module.body if not (isinstance(s, ast.FunctionDef) and s.name == entry_point)]
    return "\n".join(ast.unparse(s) for s in kept)


def rename_calls(test: str, name: str) -> str:
    """MBPP-style tests call the function by name; rewritten to ``candidate``, the one name bound to the program's
    function (a test's other free names would come from the program too)."""
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return test  # the sandbox reports the SyntaxError as that test's failure

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name("candidate", node.ctx) if node.id == name else node

    return ast.unparse(Rename().visit(tree))


def sandbox_test(test: str, target: str, setup: str = "") -> str:
    """One test as the sandbox's judge runs it: ``target`` is the program's expression for the function under test
    (its name, or ``Solution().method`` for LeetCode-style problems)."""
    return f"{setup}\ncandidate = _vh_program({target!r})\n{test}\n"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _leaves_early(check: ast.FunctionDef) -> bool:
    """A return/yield in check's own body (not in a nested function)."""
    stack: list[ast.AST] = list(check.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False
