"""Where a graph node came from in the user's model: module path and source line."""

from __future__ import annotations

import os
import re
import sysconfig

import torch
from torch.fx import Node

from .artifacts import LayerSource

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# Frames inside installed libraries are how a module ran, not where the user wrote it; so are
# etk's own (a rewrite's pass that made a node), except the zoo's models, which are the user's.
_TOOLKIT = os.path.dirname(os.path.abspath(__file__))
_ZOO = os.path.join(_TOOLKIT, "models", "zoo") + os.sep
_LIBRARY_ROOTS = tuple(
    {
        os.path.dirname(os.path.dirname(torch.__file__)),
        *(p for p in sysconfig.get_paths().values() if "site-packages" in p),
        _TOOLKIT + os.sep,
    }
)
# --io-layout nhwc wraps the user's model (toolkit/models/layout.py) as its `model`
_IO_WRAPPER = "layout.ChannelsLastInterface"
_IO_PATH = re.compile(r"^(L\['self'\]\.)?model\.?")
_OVERLOAD_SUFFIX = re.compile(r"(\.default)?(_\d+)?$")


def _module(node: Node) -> tuple[str, str] | None:
    """(module path, module type name) of the innermost module the node ran in, as the user
    wrote the model: under --io-layout nhwc, not through the wrapper (`model.features.3`)."""
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    if not stack:
        return None
    if len(stack) > 1 and _IO_WRAPPER in str(stack[0][1]):
        stack = [(_IO_PATH.sub("", str(path)), kind) for path, kind in stack[1:]]
    path, module_type = stack[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    type_name = getattr(module_type, "__name__", str(module_type).rsplit(".", 1)[-1])
    return path, type_name.strip(chr(39) + ">")


def _user_frame(node: Node) -> tuple[str, int] | None:
    """(file name, line) of the innermost frame of the user's code in the node's stack trace."""
    frames = [
        f
        for f in _FRAME.findall(node.meta.get("stack_trace") or "")
        if f[0].startswith(_ZOO) or not f[0].startswith(_LIBRARY_ROOTS)
    ]
    if not frames:
        return None
    file, line = frames[-1]
    return file.rsplit("/", 1)[-1], int(line)


def _origin_name(node: Node) -> str:
    """The name of the node this one was first made from, through the passes that copied it."""
    sources = node.meta.get("from_node") or []
    if not sources:
        return node.name
    origin = sources[0]
    while origin.from_node:
        origin = origin.from_node[0]
    return str(origin.name)


# what a node's metadata says about the call of the user's model it came from
CALL_META = ("nn_module_stack", "stack_trace", "torch_fn")


def take_call(node: Node, source: Node | dict) -> None:
    """A node a pass made takes the call of `source` (a node, or its metadata saved)."""
    meta = source.meta if isinstance(source, Node) else source
    node.meta.update({k: meta[k] for k in CALL_META if k in meta})


def node_layer(node: Node) -> LayerSource:
    """The call of the user's model the node came from, as far as its metadata tells."""
    module = _module(node) or ("", "")
    frame = _user_frame(node) or ("", 0)
    torch_fn = node.meta.get("torch_fn")
    if torch_fn:
        call_id, qualified = str(torch_fn[0]), str(torch_fn[1])
        call = qualified.rsplit(".", 1)[-1]
        if qualified.startswith("OpOverload"):  # aten.bmm.default, aten.mul.Tensor: the op's name
            call = _OVERLOAD_SUFFIX.sub("", call_id.split(".")[0])
    else:  # a node a pass made: named after the node it was first made from ("bmm.default_1")
        call_id = _origin_name(node)
        call = _OVERLOAD_SUFFIX.sub("", call_id).split(".")[0]
    return LayerSource(module[0], module[1], call, call_id, frame[0], frame[1])


def _nearby(node: Node, read, depth: int = 4):
    """read() of the nearest node around `node` that gives one: its users first (the call that
    takes a result is more often written on the line, and in the module, that made it), then
    its inputs."""
    for step in ("users", "all_input_nodes"):
        seen, frontier = {node}, [node]
        for _ in range(depth):
            frontier = [n for f in frontier for n in getattr(f, step) if n not in seen]
            seen.update(frontier)
            for near in frontier:
                found = read(near)
                if found is not None:
                    return found
    return None


def nearby_line(node: Node) -> tuple[str, int] | None:
    """(file, line) of the nearest node around one a pass made without a stack trace
    (`(attention @ v).transpose(1, 2)`)."""
    return _nearby(node, _user_frame)


def nearby_call(node: Node) -> Node | None:
    """The nearest node with a module around one a pass made without its module (the CLAMPs
    a GRU's decomposition adds): the call the node was made for."""
    return _nearby(node, lambda near: near if _module(near) is not None else None)


def node_source(node: Node) -> str:
    """'features.3 (Conv2d) at model.py:42', as far as the node's metadata tells."""
    parts = []
    module = _module(node)
    if module is not None:
        parts.append(f"{module[0] or '<root>'} ({module[1]})")
    frame = _user_frame(node)
    if frame is not None:
        parts.append(f"at {frame[0]}:{frame[1]}")
    return " ".join(parts) or node.name
