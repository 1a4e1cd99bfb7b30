"""Where a graph node came from in the user's model: module path and source line."""

from __future__ import annotations

import os
import re
import sysconfig

import torch
from torch.fx import Node

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# Frames inside installed libraries are how a module ran, not where the user wrote it.
_LIBRARY_ROOTS = tuple(
    {
        os.path.dirname(os.path.dirname(torch.__file__)),
        *(p for p in sysconfig.get_paths().values() if "site-packages" in p),
    }
)


def node_source(node: Node) -> str:
    """'features.3 (Conv2d) at model.py:42', as far as the node's metadata tells."""
    parts = []
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path, module_type = list(stack.values())[-1]
        path = re.sub(r"^L\['self'\]\.?", "", str(path)) or "<root>"
        type_name = getattr(module_type, "__name__", str(module_type).rsplit(".", 1)[-1])
        parts.append(f"{path} ({type_name.strip(chr(39) + '>')})")
    frames = [
        f
        for f in _FRAME.findall(node.meta.get("stack_trace") or "")
        if not f[0].startswith(_LIBRARY_ROOTS)
    ]
    if frames:
        file, line = frames[-1]
        parts.append(f"at {file.rsplit('/', 1)[-1]}:{line}")
    return " ".join(parts) or node.name
