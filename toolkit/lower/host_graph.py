"""Save and load the host side of a compiled program: the edge graph around the delegates.

FX graph modules holding ExecuTorch edge ops cannot be pickled, so the graph is stored as a list
of nodes whose targets are named (edge ops by their dialect name, aten ops by overload name) and
whose delegate calls keep only their order. What is loaded runs in runners/host_interpreter.py exactly like
the graph ExecuTorch produced.
"""

from __future__ import annotations

import functools
import json
import operator
from pathlib import Path
from typing import Any

import torch

_DELEGATE_CALL = torch.ops.higher_order.executorch_call_delegate


def _target_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    if target is _DELEGATE_CALL:
        return "delegate"
    if type(target).__name__ == "EdgeOpOverload":
        return f"edge:{target.__name__}"  # "quantized_decomposed.quantize_per_tensor.default"
    # a torch op left in the edge graph (a where's scalar_tensor): its __name__ lacks the namespace
    return f"aten:{target}"  # "aten.scalar_tensor.default"


def _resolve(name: str):
    if name == "getitem":
        return operator.getitem
    if name == "delegate":
        return _DELEGATE_CALL
    kind, dotted = name.split(":", 1)
    namespace, op, overload = dotted.split(".")
    from torch.ao.quantization.fx import _decomposed  # noqa: F401  quantized_decomposed ops

    if kind == "edge":
        # An edge op runs the torch op of the same name (EdgeOpOverload.__call__): loading that one
        # spares a cached run the import of ExecuTorch's exir, seconds of a deploy. Ops torch does
        # not register itself come from exir after all.
        found = getattr(getattr(getattr(torch.ops, namespace), op, None), overload, None)
        if found is not None:
            return found
        from executorch.exir.dialects._ops import ops as exir_ops

        return getattr(getattr(getattr(exir_ops.edge, namespace), op), overload)
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


# torch's argument constants a graph holds (a where's scalar_tensor has layout and device), by the
# key they are stored under
_TORCH_CONSTANTS: dict[str, type] = {
    "dtype": torch.dtype,
    "layout": torch.layout,
    "memory_format": torch.memory_format,
    "device": torch.device,
}


def _torch_constant(cls: type, name: str):
    """torch.float32 from "float32", torch.device("cpu") from "cpu": only a value of that type."""
    try:
        value = cls(name) if cls is torch.device else getattr(torch, name, None)
    except RuntimeError:  # torch.device("not a device")
        value = None
    if not isinstance(value, cls):
        raise ValueError(f"not a torch {cls.__name__}: {name!r}")
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
        if "node" in value:
            return env[value["node"]]
        for kind, cls in _TORCH_CONSTANTS.items():
            if kind in value:
                return _torch_constant(cls, value[kind])
        items = [_decode(v, env) for v in value["seq"]]
        return tuple(items) if value["tuple"] else items
    return value


def save_host_graph(graph_module: torch.fx.GraphModule, path: Path) -> None:
    nodes: list[dict[str, Any]] = []
    constants: dict[str, torch.Tensor] = {}
    for node in graph_module.graph.nodes:
        record: dict[str, Any] = {"op": node.op, "name": node.name}
        if node.op == "get_attr":
            attr = functools.reduce(getattr, node.target.split("."), graph_module)  # "t.weight"
            if isinstance(attr, torch.Tensor):
                constants[node.name] = attr
                record["constant"] = True
        elif node.op == "call_function":
            record["target"] = _target_name(node.target)
            record["args"] = _encode(node.args)
            record["kwargs"] = {k: _encode(v) for k, v in node.kwargs.items()}
        elif node.op == "output":
            record["args"] = _encode(node.args)
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            record["shape"], record["dtype"] = (
                list(value.shape),
                str(value.dtype).replace("torch.", ""),
            )
        nodes.append(record)
    path.write_text(json.dumps({"nodes": nodes}))
    if constants:
        torch.save(constants, path.with_suffix(".constants.pt"))


def load_host_graph(path: Path) -> torch.fx.GraphModule:
    """The stored graph; ValueError when the file does not describe one (it is data: whatever
    torch.fx asserts about a malformed node is a damaged store, not a crash)."""
    try:
        return _built_graph(path)
    except (
        AssertionError,
        IndexError,
        LookupError,
        TypeError,
        AttributeError,
        RuntimeError,
    ) as exc:
        raise ValueError(f"{path.name} is not a graph ({type(exc).__name__}: {exc})") from None


def _built_graph(path: Path) -> torch.fx.GraphModule:
    data = json.loads(path.read_text())
    constants_path = path.with_suffix(".constants.pt")
    constants = torch.load(constants_path, weights_only=True) if constants_path.is_file() else {}
    root = torch.nn.Module()
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for record in data["nodes"]:
        op, name = record["op"], record["name"]
        if op == "placeholder":
            node = graph.placeholder(name)
        elif op == "get_attr":
            if record.get("constant"):
                setattr(root, name, constants[name])
            else:  # a delegate: the runner supplies it, by call order
                setattr(root, name, torch.nn.Module())
            node = graph.get_attr(name)
        elif op == "call_function":
            node = graph.call_function(
                _resolve(record["target"]),
                _decode(record["args"], env),
                {k: _decode(v, env) for k, v in record["kwargs"].items()},
            )
        else:
            node = graph.output(_decode(record["args"], env)[0])
        if "shape" in record:
            node.meta["val"] = torch.empty(record["shape"], dtype=getattr(torch, record["dtype"]))
        node.name = name
        env[name] = node
    graph.lint()  # every argument a node defined before it, one output
    return torch.fx.GraphModule(root, graph)
