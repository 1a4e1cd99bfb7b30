"""Save and load the host side of a compiled program: the edge graph around the delegates.

FX graph modules holding ExecuTorch edge ops cannot be pickled, so the graph is stored as a list
of nodes (host_graph.json) whose targets are operator names and whose delegate calls keep only
their order, and its constant tensors as raw bytes (host_graph.constants.bin) indexed in the JSON.
What is loaded runs in runners/host_interpreter.py exactly like the graph ExecuTorch produced.

A stored graph is data, whoever wrote it (docs/report-format.md, "What a stored program may hold"):
targets come from an allow-list by name (host_operators.py), arguments are JSON values, node
references and torch's dtype/layout/device constants, constants are plain numbers (no pickle), and
the graph is run once on meta tensors of its stored shapes before it is accepted, so a node whose
arguments its operator does not take, or whose stored shape is not what it computes, makes the
store damaged rather than a failure in the middle of a run.
"""

from __future__ import annotations

import functools
import json
import operator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .host_operators import DELEGATE_CALL, RefusedOperator, host_operator

CONSTANTS_SUFFIX = ".constants.bin"
# the dtypes a stored constant or node may have (numpy can hold each; no object arrays)
_DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float32",
        "float16",
        "float64",
        "int8",
        "uint8",
        "int16",
        "int32",
        "int64",
        "bool",
    )
}
_MAX_ELEMENTS = 1 << 28  # per tensor: far above any program an Ethos-U runs (256 MiB of int8)

# torch's argument constants a graph holds (a where's scalar_tensor has layout and device), by the
# key they are stored under
_TORCH_CONSTANTS: dict[str, type] = {
    "dtype": torch.dtype,
    "layout": torch.layout,
    "memory_format": torch.memory_format,
    "device": torch.device,
}


def _target_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    if target is DELEGATE_CALL:
        return "delegate"
    if type(target).__name__ == "EdgeOpOverload":
        return target.__name__  # "quantized_decomposed.quantize_per_tensor.default"
    return str(target)  # a torch op left in the edge graph: "aten.scalar_tensor.default"


def _torch_constant(cls: type, name: str):
    """torch.float32 from "float32", torch.device("cpu") from "cpu": only a value of that type."""
    if not isinstance(name, str):
        raise ValueError(f"not a torch {cls.__name__}: {name!r}")
    try:
        value = cls(name) if cls is torch.device else getattr(torch, name, None)
    except RuntimeError:  # torch.device("not a device")
        value = None
    if not isinstance(value, cls):
        raise ValueError(f"not a torch {cls.__name__}: {name[:40]!r}")
    return value


def _encode(value) -> Any:
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    for kind, cls in _TORCH_CONSTANTS.items():
        if isinstance(value, cls):
            return {kind: str(value).replace("torch.", "")}
    if isinstance(value, (list, tuple)):
        return {"seq": [_encode(v) for v in value], "tuple": isinstance(value, tuple)}
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    raise TypeError(f"cannot store graph argument of type {type(value).__name__}")


def _decode(value, env: dict[str, torch.fx.Node]):
    if isinstance(value, dict):
        if set(value) == {"node"}:
            return env[value["node"]]
        kinds = [k for k in _TORCH_CONSTANTS if k in value]
        if kinds and len(value) == 1:
            return _torch_constant(_TORCH_CONSTANTS[kinds[0]], value[kinds[0]])
        if set(value) == {"seq", "tuple"} and isinstance(value["seq"], list):
            items = [_decode(v, env) for v in value["seq"]]
            return tuple(items) if value["tuple"] is True else items
        raise ValueError(f"an argument of unknown form ({sorted(value)[:4]})")
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    raise ValueError(f"an argument of type {type(value).__name__}")


def _tensor_spec(value: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}


def save_host_graph(graph_module: torch.fx.GraphModule, path: Path) -> None:
    nodes: list[dict[str, Any]] = []
    blob = bytearray()
    for node in graph_module.graph.nodes:
        record: dict[str, Any] = {"op": node.op, "name": node.name}
        if node.op == "get_attr":
            attr = functools.reduce(getattr, node.target.split("."), graph_module)  # "t.weight"
            if isinstance(attr, torch.Tensor):
                data = attr.detach().cpu().contiguous().numpy().tobytes()
                record["constant"] = {**_tensor_spec(attr), "offset": len(blob), "size": len(data)}
                blob += data
        elif node.op == "call_function":
            record["target"] = _target_name(node.target)
            record["args"] = _encode(node.args)
            record["kwargs"] = {k: _encode(v) for k, v in node.kwargs.items()}
        elif node.op == "output":
            record["args"] = _encode(node.args)
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            record.update(_tensor_spec(value))
        nodes.append(record)
    path.write_text(json.dumps({"nodes": nodes}))
    if blob:
        path.with_suffix(CONSTANTS_SUFFIX).write_bytes(bytes(blob))


class _Damaged(ValueError):
    pass


def load_host_graph(path: Path) -> torch.fx.GraphModule:
    """The stored graph; ValueError when the file does not describe one etk could have written
    (it is data: whatever torch.fx asserts about a malformed node is a damaged store, not a
    crash)."""
    try:
        graph_module = _built_graph(path)
        _run_on_meta(graph_module)
        return graph_module
    except RefusedOperator as exc:
        raise ValueError(f"{path.name} calls an operator etk does not run: {exc}") from None
    except (
        AssertionError,
        IndexError,
        LookupError,
        TypeError,
        AttributeError,
        RuntimeError,
        ValueError,
        OverflowError,
        NotImplementedError,
    ) as exc:
        raise ValueError(
            f"{path.name} is not a graph etk wrote ({type(exc).__name__}: {exc})"
        ) from None


def _dtype(name) -> torch.dtype:
    if not isinstance(name, str) or name not in _DTYPES:
        raise _Damaged(f"a tensor of dtype {str(name)[:20]!r}")
    return _DTYPES[name]


def _shape(shape) -> list[int]:
    if (
        not isinstance(shape, list)
        or len(shape) > 8
        or not all(type(d) is int and d >= 0 for d in shape)
    ):
        raise _Damaged(f"a tensor shape {str(shape)[:40]}")
    if int(np.prod(shape, dtype=np.float64)) > _MAX_ELEMENTS:
        raise _Damaged(f"a tensor of {shape} elements")
    return shape


def _constant(record: dict, blob: bytes) -> torch.Tensor:
    spec = record["constant"]
    dtype, shape = _dtype(spec["dtype"]), _shape(spec["shape"])
    offset, size = spec["offset"], spec["size"]
    itemsize = torch.empty((), dtype=dtype).element_size()
    count = int(np.prod(shape, dtype=np.int64))
    if (
        type(offset) is not int
        or offset < 0
        or size != count * itemsize
        or offset + size > len(blob)
    ):
        raise _Damaged(f"constant {record['name']} lies outside {CONSTANTS_SUFFIX}")
    array = np.frombuffer(
        blob, dtype=torch.empty((), dtype=dtype).numpy().dtype, count=count, offset=offset
    )
    return torch.from_numpy(array.reshape(shape).copy())


def _call_function(graph: torch.fx.Graph, record: dict, env):
    name = record["name"]
    target = host_operator(record["target"])
    kwargs = record["kwargs"]
    if not isinstance(kwargs, dict) or not all(
        isinstance(k, str) and k.isidentifier() for k in kwargs
    ):
        raise _Damaged(f"node {name}'s keyword arguments")
    args = _decode(record["args"], env)
    if not isinstance(args, tuple):
        raise _Damaged(f"node {name}'s arguments")
    return graph.call_function(target, args, {k: _decode(v, env) for k, v in kwargs.items()})


def _node(graph: torch.fx.Graph, root: torch.nn.Module, record: dict, env, blob: bytes):
    op, name = record["op"], record["name"]
    if not isinstance(name, str) or not name.isidentifier() or name in env:
        raise _Damaged(f"a node named {str(name)[:40]!r}")
    if op == "placeholder":
        return graph.placeholder(name)
    if op == "get_attr":
        # a constant, or a delegate (the runner supplies it, by call order)
        setattr(root, name, _constant(record, blob) if "constant" in record else torch.nn.Module())
        return graph.get_attr(name)
    if op == "call_function":
        return _call_function(graph, record, env)
    if op == "output":
        args = _decode(record["args"], env)
        if not isinstance(args, tuple) or len(args) != 1:
            raise _Damaged("the graph's output")
        return graph.output(args[0])
    raise _Damaged(f"a node of kind {str(op)[:20]!r}")


def _built_graph(path: Path) -> torch.fx.GraphModule:
    data = json.loads(path.read_text())
    constants_path = path.with_suffix(CONSTANTS_SUFFIX)
    blob = constants_path.read_bytes() if constants_path.is_file() else b""
    root = torch.nn.Module()
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for record in data["nodes"]:
        node = _node(graph, root, record, env, blob)
        if "shape" in record:
            node.meta["val"] = torch.empty(
                _shape(record["shape"]), dtype=_dtype(record["dtype"]), device="meta"
            )
        node.name = record["name"]
        env[node.name] = node
    graph.lint()  # every argument a node defined before it
    outputs = [n for n in graph.nodes if n.op == "output"]
    if len(outputs) != 1 or outputs[0] is not list(graph.nodes)[-1]:
        raise _Damaged("the graph does not end in its one output")
    return torch.fx.GraphModule(root, graph)


class _MetaInterpreter(torch.fx.Interpreter):
    """Runs the graph on meta tensors (no data, no memory): every operator gets arguments it
    takes, and computes the shape and dtype the store says; a delegate returns its stored
    output shapes."""

    def run_node(self, node):
        if node.op == "placeholder":
            return self._stored(node)
        if node.op == "get_attr" and "val" not in node.meta:
            return None  # a delegate module
        if node.target is DELEGATE_CALL:
            return self._delegate_outputs(node)
        value = super().run_node(node)
        if node.op == "output" and not _all_tensors(value):
            raise _Damaged("the graph's output is not tensors")
        if node.op == "get_attr":
            value = value.to("meta")
        if isinstance(value, torch.Tensor) and "val" in node.meta:
            stored = node.meta["val"]
            if value.shape != stored.shape or value.dtype != stored.dtype:
                raise _Damaged(
                    f"node {node.name} computes {tuple(value.shape)} {value.dtype}, not its stored shape"
                )
        return value

    def _delegate_outputs(self, node) -> tuple:
        module, *inputs = node.args
        if not (isinstance(module, torch.fx.Node) and module.op == "get_attr"):
            raise _Damaged(f"delegate call {node.name} names no delegate")
        if "val" in module.meta or not _all_tensors(tuple(self.env[i] for i in inputs)):
            raise _Damaged(f"delegate call {node.name} is not given tensors")
        outputs: list[torch.Tensor | None] = [None] * (
            1 + max((u.args[1] for u in node.users), default=-1)
        )
        for user in node.users:
            outputs[user.args[1]] = self._stored(user)
        return tuple(outputs)

    @staticmethod
    def _stored(node) -> torch.Tensor:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise _Damaged(f"node {node.name} has no stored shape")
        return value


def _all_tensors(value) -> bool:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return bool(values) and all(isinstance(v, torch.Tensor) for v in values)


def delegate_calls(graph_module: torch.fx.GraphModule) -> int:
    return sum(1 for n in graph_module.graph.nodes if n.target is DELEGATE_CALL)


def _run_on_meta(graph_module: torch.fx.GraphModule) -> None:
    for node in graph_module.graph.nodes:
        if node.target is DELEGATE_CALL:
            if any(
                u.target is not operator.getitem
                or type(u.args[1]) is not int
                or not 0 <= u.args[1] < 256
                for u in node.users
            ):
                raise _Damaged(f"delegate call {node.name} is used other than by index")
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    with torch.no_grad():
        _MetaInterpreter(graph_module).run(*[None] * len(placeholders))
