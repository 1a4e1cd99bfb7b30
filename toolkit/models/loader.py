"""MODEL specs: zoo:NAME, path/to/file.py:Name, model.pt2."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path

import torch
from torch import nn

from ..artifacts import LoadedModel
from ..errors import UserError
from ..model_spec import names_a_definition
from .model_digest import NotExportable, model_digest
from .pt2_archive import check_pt2_archive, weights_only_loads
from .zoo import build_zoo_model


def parse_input_shapes(text: str) -> tuple[tuple[int, ...], ...]:
    """'1,3,32,32' or '1,3,32,32;1,10' (one shape per model input)."""
    shapes = []
    for part in text.split(";"):
        try:
            shape = tuple(int(d) for d in part.split(","))
        except ValueError:
            shape = ()
        if not shape or any(d <= 0 for d in shape):
            raise UserError(
                f"--input-shape '{text}' is not a list of positive integers like "
                "1,3,32,32 (separate several inputs with ';')"
            )
        shapes.append(shape)
    return tuple(shapes)


def _model_hash(module: nn.Module, inputs: tuple, spec: str) -> str:
    """What the model computes on these inputs (model_digest): not which file, class or factory
    it came from, so two models that differ only in name share it, and no two that compute
    differently do."""
    try:
        return model_digest(module, inputs)
    except NotExportable as exc:
        raise UserError(
            f"model '{spec}' failed to export with torch.export: {exc} "
            "(check the input shape, or make the model export-friendly)"
        ) from exc


def model_file(spec: str) -> Path | None:
    """The file a MODEL spec is read from (the .py file of path.py:Name; relative paths are
    relative to the current directory); None for zoo models."""
    if spec.startswith("zoo:"):
        return None
    if not spec.endswith((".pt2", ".tflite")) and names_a_definition(spec):
        return Path(spec.rpartition(":")[0])
    return Path(spec)


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _import_file(path: Path):
    module_name = f"etk_user_model_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # As `python file.py` would: the file's folder is importable, so a model split over several
    # files (`from blocks import InvertedResidual`) loads.
    # It stays importable: a constructor may import lazily.
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UserError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _instantiate(obj, name: str, path: Path) -> nn.Module:
    if inspect.isclass(obj):
        required = [
            p.name
            for p in inspect.signature(obj).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if required:
            raise UserError(
                f"{path.name}:{name} needs constructor arguments "
                f"({', '.join(required)}): add a factory function that builds it "
                f"and pass {path.name}:that_function"
            )
    elif not callable(obj):
        raise UserError(f"{path.name}:{name} is not a class or function returning an nn.Module")
    try:
        model = obj()
    except Exception as exc:
        raise UserError(f"building {path.name}:{name} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise UserError(f"{path.name}:{name} returned {type(model).__name__}, not an nn.Module")
    return model


def _file_model(spec: str, shapes) -> LoadedModel:
    file_part, _, name = spec.rpartition(":")
    path = Path(file_part)
    if not path.is_file():
        raise UserError(f"model file {path} not found")
    if not name:
        raise UserError(f"'{spec}' names no class: use {path}:ClassName or {path}:factory")
    module = _import_file(path)
    if not hasattr(module, name):
        found = sorted(
            n
            for n, v in vars(module).items()
            if inspect.isclass(v) and issubclass(v, nn.Module) and v.__module__ == module.__name__
        )
        raise UserError(
            f"{path.name} has no '{name}'" + (f": it defines {', '.join(found)}" if found else "")
        )
    model = _instantiate(getattr(module, name), name, path).eval()
    if shapes:
        inputs = tuple(torch.randn(s, generator=torch.Generator().manual_seed(0)) for s in shapes)
    elif hasattr(module, "example_inputs"):
        inputs = module.example_inputs()
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    else:
        raise UserError(
            f"no input shape for {spec}: pass --input-shape 1,3,32,32 or define "
            f"example_inputs() in {path.name}"
        )
    _check_interface(model, inputs, spec)
    return LoadedModel(spec, f"{path.stem}.{name}", model, inputs, _model_hash(model, inputs, spec))


def _check_interface(model: nn.Module, inputs: tuple, spec: str) -> None:
    """Float tensors in, a tensor or a tuple/list of tensors out: what the toolkit can quantize
    and compare."""
    for index, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise UserError(
                f"{spec}: input {index} is a {type(x).__name__}, not a tensor: "
                "the model must take tensors"
            )
        if not x.is_floating_point():
            raise UserError(
                f"{spec}: input {index} is {str(x.dtype).replace('torch.', '')}: "
                "etk quantizes float inputs to int8; an integer input (such as an "
                "embedding's indices) is not supported: give the model float inputs "
                "(do the lookup outside it)"
            )
    output = _check_runs(model, inputs, spec)
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        raise UserError(
            f"{spec}: forward returns a {type(output).__name__}; return a tensor or a "
            "tuple of tensors"
        )


def _check_runs(model: nn.Module, inputs: tuple, spec: str):
    try:
        with torch.no_grad():
            return model(*inputs)
    except Exception as exc:
        shapes = ", ".join(str(tuple(x.shape)) for x in inputs)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if _wants_integers(first):
            raise UserError(
                f"{spec} wants integer inputs ({first}): etk feeds float tensors, and the "
                "Ethos-U flow quantizes float inputs; give the model float inputs (for an "
                "nn.Embedding, pass the embedded vectors)"
            ) from exc
        raise UserError(
            f"{spec} does not run on inputs of shape {shapes}: {first} (check --input-shape)"
        ) from exc


def _wants_integers(message: str) -> bool:
    """torch's dtype complaint about float indices (nn.Embedding, index_select)."""
    return "scalar types: Long, Int" in message


def _pt2_model(spec: str) -> LoadedModel:
    path = Path(spec)
    if not path.is_file():
        raise UserError(f"model file {path} not found")
    check_pt2_archive(path)
    try:
        with weights_only_loads():
            program = torch.export.load(str(path))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path} is not a loadable torch.export .pt2 file: {first}") from exc
    args, _kwargs = program.example_inputs or ((), {})
    if not args:
        raise UserError(
            f"{path} holds no example inputs: save it with torch.export.save after "
            "torch.export.export(model, example_inputs)"
        )
    model = program.module(check_guards=False)
    _check_interface(model, tuple(args), spec)
    return LoadedModel(spec, path.stem, model, tuple(args), file_hash(path))


def live_model(module: object, example_inputs: object) -> LoadedModel:
    """An nn.Module the caller built (the Python API): a copy in eval mode, so the caller's module
    keeps its training state. It is exported once here, so one that torch.export cannot take is
    told so before anything compiles."""
    kind = type(module).__name__
    if not isinstance(module, nn.Module):
        raise UserError(f"model is a {kind}, not a torch.nn.Module or a MODEL spec string")
    if example_inputs is None:
        raise UserError(f"{kind}: pass example_inputs=(tensor, ...) with the model's input shapes")
    inputs = (
        tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    )
    spec = f"python:{type(module).__qualname__}"
    model = copy.deepcopy(module).eval()
    _check_interface(model, inputs, spec)
    try:
        torch.export.export(model, inputs)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{spec} failed to export with torch.export: {first}") from exc
    return LoadedModel(spec, kind, model, inputs, _model_hash(model, inputs, spec))


def load_model(spec: str, input_shape: str | None = None) -> LoadedModel:
    shapes = parse_input_shapes(input_shape) if input_shape else None
    if spec.startswith("zoo:"):
        name = spec[4:]
        model, inputs = build_zoo_model(name)
        if shapes:
            raise UserError("zoo models have fixed input shapes: drop --input-shape")
        return LoadedModel(spec, name, model, inputs, _model_hash(model, inputs, spec))
    if spec.endswith(".pt2"):
        return _pt2_model(spec)
    if names_a_definition(spec):
        return _file_model(spec, shapes)
    raise UserError(
        f"cannot tell what model '{spec}' is: use zoo:NAME, file.py:ClassName or a .pt2 file"
    )
