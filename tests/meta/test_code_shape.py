"""No function in toolkit/ over 80 lines or of cyclomatic complexity over 15 (radon), but the
allowed ones below: each names why it is still here. The list only shrinks."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

radon_visitors = pytest.importorskip("radon.visitors")  # the [test] extra brings it

TOOLKIT = Path(__file__).resolve().parents[2] / "toolkit"
MAX_LINES = 80
MAX_COMPLEXITY = 15

# (file under toolkit/, function as radon names it): lines, complexity when allowed. Empty: every
# function fits the gate.
ALLOWED: dict[tuple[str, str], tuple[int, int]] = {}


def _functions(path: Path):
    visitor = radon_visitors.ComplexityVisitor.from_code(path.read_text())
    blocks = list(visitor.functions)
    for cls in visitor.classes:
        blocks.extend(cls.methods)
    while blocks:
        block = blocks.pop()
        blocks.extend(block.closures)
        yield block.fullname, block.endline - block.lineno + 1, block.complexity


@functools.cache
def _offenders() -> dict[tuple[str, str], tuple[int, int]]:
    found = {}
    for path in sorted(TOOLKIT.rglob("*.py")):
        for name, lines, complexity in _functions(path):
            if lines > MAX_LINES or complexity > MAX_COMPLEXITY:
                found[(path.relative_to(TOOLKIT).as_posix(), name)] = (lines, complexity)
    return found


def test_no_function_is_longer_or_more_complex_than_allowed():
    found = _offenders()
    new = {key: shape for key, shape in found.items() if key not in ALLOWED}
    assert new == {}, (
        f"functions over {MAX_LINES} lines or complexity {MAX_COMPLEXITY} (lines, complexity): "
        "split them"
    )
    grown = {
        key: (shape, ALLOWED[key])
        for key, shape in found.items()
        if key in ALLOWED and (shape[0] > ALLOWED[key][0] or shape[1] > ALLOWED[key][1])
    }
    assert grown == {}, "an allowed function grew (now, allowed): split it instead"


def test_the_allow_list_holds_only_todays_offenders():
    gone = sorted(set(ALLOWED) - set(_offenders()))
    assert gone == [], "split or gone: remove these from ALLOWED"


def test_the_gate_sees_a_long_and_a_complex_function(tmp_path):
    branches = "\n".join(f"    if x == {k}:\n        return {k}" for k in range(16))
    lines = "\n".join(f"    y{k} = {k}" for k in range(80))
    code = f"def branchy(x):\n{branches}\n\n\ndef long():\n{lines}\n    return 0\n"
    path = tmp_path / "shapes.py"
    path.write_text(code)
    shapes = {name: (lines, cc) for name, lines, cc in _functions(path)}
    assert shapes == {"branchy": (33, 17), "long": (82, 1)}
