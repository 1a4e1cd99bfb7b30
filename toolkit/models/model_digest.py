"""A digest of what a model computes: its traced graph, every tensor it reads and every setting of
the torch.nn layers it calls, so two models that compute differently never share a digest (and a
compile cache entry), whatever file, class or factory they came from.

torch.fx's symbolic trace gives the graph in milliseconds; torch.nn layers stay calls in it, so
their settings (kernel, stride, padding, eps, ...) are digested from the layer objects. A model
fx cannot trace (control flow on tensor values) is digested from torch.export's graph instead,
which costs seconds (the first export in a process imports torch's compiler).
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Iterable
from enum import Enum

import torch
from torch import nn

_MODULE_INTERNALS = frozenset(
    {"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"}
)


class _Undigestable(Exception):
    """A layer setting whose value cannot be written canonically (an arbitrary object)."""


def _canonical(value) -> str:
    """A text that names value exactly and is the same in every process (no addresses)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes, torch.dtype)):
        return repr(value)
    if isinstance(value, Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}({','.join(_canonical(v) for v in value)})"
    if isinstance(value, dict):
        items = sorted((str(k), _canonical(v)) for k, v in value.items())
        return f"dict({','.join(f'{k}:{v}' for k, v in items)})"
    if isinstance(value, (set, frozenset)):
        return f"set({','.join(sorted(_canonical(v) for v in value))})"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, torch.Tensor):
        return f"tensor({tuple(value.shape)},{value.dtype})"  # its bytes go in separately
    raise _Undigestable(type(value).__name__)


def _layer_settings(module: nn.Module) -> str:
    settings = {
        k: v
        for k, v in vars(module).items()
        if k not in _MODULE_INTERNALS and not k.endswith("_hooks") and not k.startswith("_forward")
    }
    kind = type(module)
    return f"{kind.__module__}.{kind.__qualname__}{_canonical(settings)}"


def _update_tensors(digest, named: Iterable[tuple[str, torch.Tensor]]) -> None:
    for name, tensor in named:
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())


def _fx_digest(module: nn.Module, digest) -> None:
    traced = torch.fx.symbolic_trace(module)
    digest.update(traced.code.encode())
    for node in traced.graph.nodes:
        if node.op == "call_module":
            layer = traced.get_submodule(node.target)
            digest.update(f"{node.target}={_layer_settings(layer)}".encode())
        elif node.op == "get_attr":
            value = traced
            for part in node.target.split("."):
                value = getattr(value, part)
            if isinstance(value, torch.Tensor):
                _update_tensors(digest, [(node.target, value)])
            else:
                digest.update(f"{node.target}={_canonical(value)}".encode())


def _export_digest(module: nn.Module, inputs: tuple, digest) -> None:
    program = torch.export.export(module, inputs)
    digest.update(program.graph_module.code.encode())
    _update_tensors(digest, sorted(program.state_dict.items()))
    _update_tensors(
        digest, sorted((k, v) for k, v in program.constants.items() if isinstance(v, torch.Tensor))
    )


class NotExportable(Exception):
    """Neither torch.fx nor torch.export can trace the model; the message is export's first line."""


def model_digest(module: nn.Module, inputs: tuple) -> str:
    """Hex digest of module's computation on inputs of these shapes, and of the inputs' values."""
    digest = hashlib.sha256()
    try:
        _fx_digest(module, digest)
    except Exception:  # noqa: BLE001 - fx cannot trace it (any error): export can
        digest = hashlib.sha256(b"export")
        try:
            _export_digest(module, inputs, digest)
        except Exception as exc:  # noqa: BLE001 - torch raises many types; one meaning
            lines = str(exc).strip().splitlines()
            raise NotExportable(lines[0] if lines else type(exc).__name__) from exc
    _update_tensors(digest, module.named_parameters(remove_duplicate=False))
    _update_tensors(digest, module.named_buffers(remove_duplicate=False))
    _update_tensors(digest, ((f"input{i}", x) for i, x in enumerate(inputs)))
    return digest.hexdigest()[:16]
