"""Run a compiled program on the host: CPU operators through PyTorch, delegates through a callback.

The delegate callback gets the delegate and its int8/int16 inputs as numpy arrays and returns its
outputs, so the same CPU side serves the TOSA reference model and the simulator alike.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import torch

from ..artifacts import Delegate, Program
from ..errors import ToolError

DelegateFn = Callable[[Delegate, list[np.ndarray]], list[np.ndarray]]


def _output_shapes(call: torch.fx.Node) -> dict[int, tuple[int, ...]]:
    """Output index -> shape the graph expects (runners may return Vela's squeezed shapes)."""
    return {
        cast(int, u.args[1]): tuple(u.meta["val"].shape)  # getitem(call, index)
        for u in call.users
        if u.target is operator.getitem and "val" in u.meta
    }


class _DelegatingInterpreter(torch.fx.Interpreter):
    def __init__(self, program: Program, run_delegate: DelegateFn):
        super().__init__(program.graph_module)
        # torch.fx otherwise appends "While executing ...", the node's stack trace and a tlparse
        # hint to the message of any error raised inside (a delegate's one-line UserError)
        self.extra_traceback = False
        self._delegates = {}
        calls = [
            n
            for n in program.graph_module.graph.nodes
            if n.op == "call_function" and "executorch_call_delegate" in str(n.target)
        ]
        for delegate, call in zip(program.delegates, calls):
            self._delegates[call] = delegate
        self._run_delegate = run_delegate
        self._program_name = f"{program.model_name} ({program.variant})"

    def run_node(self, node):
        delegate = self._delegates.get(node)
        if delegate is None:
            return self._run_cpu_node(node)
        args = self.fetch_args_kwargs_from_env(node)[0][1:]
        outputs = self._run_delegate(delegate, [a.detach().numpy() for a in args])
        shapes = _output_shapes(node)
        return tuple(
            torch.from_numpy(np.ascontiguousarray(o).reshape(shapes.get(i, o.shape)))
            for i, o in enumerate(outputs)
        )

    def _run_cpu_node(self, node):
        try:
            return super().run_node(node)
        except Exception as exc:  # noqa: BLE001 - torch raises many kinds on bad operands
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ToolError(
                f"CPU operator {node.name} ({node.target}) of {self._program_name} failed: "
                f"{first}; if the program came from an output folder or the compile cache, "
                "remove it to compile it again"
            ) from exc


def execute(
    program: Program, inputs: Sequence[np.ndarray], run_delegate: DelegateFn
) -> tuple[np.ndarray, ...]:
    if program.graph_module is None:
        raise ValueError("this program has no host graph (was it loaded from disk?)")
    tensors = [torch.from_numpy(np.ascontiguousarray(x)) for x in inputs]
    with torch.no_grad():
        outputs = _DelegatingInterpreter(program, run_delegate).run(*tensors)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return tuple(o.detach().numpy() for o in outputs)
