"""Loading a .pt2 from someone else without running code from it.

torch.export.load unpickles some archive entries: state-dict and constant entries marked
`use_pickle` (tensor subclasses), custom and opaque objects, legacy .pt weight files (torch.load
with weights_only=False), and the sample inputs when a weights-only load fails; AOTInductor
packages hold shared libraries. A pickle can run any code while it loads, so such archives are
refused before loading (their entries are named), and every torch.load during the load is
weights-only.
"""

from __future__ import annotations

import json
import zipfile
from contextlib import contextmanager
from pathlib import Path

import torch

from ..errors import UserError
from ..lower.patching import patched

_TENSOR_PREFIX = "tensor_"  # plain constant tensors; custom_obj_/opaque_obj_ are pickles


def _refuse(path: Path, what: str) -> UserError:
    return UserError(
        f"{path} holds {what}, which would run code while loading: refused "
        "(re-export the model with plain tensors, or load it from its .py file, "
        "which is code you can read)"
    )


def _config_entries(archive: zipfile.ZipFile, name: str, path: Path) -> dict:
    try:
        config = json.loads(archive.read(name)).get("config", {})
    except (ValueError, AttributeError, zipfile.BadZipFile, OSError) as exc:
        raise UserError(
            f"{path} is not a torch.export .pt2 file: {name} is unreadable ({exc})"
        ) from None
    if not isinstance(config, dict) or not all(isinstance(e, dict) for e in config.values()):
        raise UserError(f"{path} is not a torch.export .pt2 file: {name} is malformed")
    return config


def check_pt2_archive(path: Path) -> None:
    """UserError unless path is a .pt2 zip archive whose entries load without unpickling code."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError):
        raise UserError(
            f"{path} is not a torch.export .pt2 file (not a zip archive): save it "
            "with torch.export.save"
        ) from None
    with archive:
        names = archive.namelist()
        if not any(
            n.split("/", 1)[-1].startswith("models/") and n.endswith(".json") for n in names
        ):
            raise UserError(
                f"{path} is not a torch.export .pt2 file (no models/*.json): save "
                "it with torch.export.save"
            )
        for name in names:
            inner = "/" + name
            if "/data/aotinductor/" in inner:
                raise _refuse(path, f"an AOTInductor package ({name})")
            if ("/data/weights/" in inner or "/data/constants/" in inner) and name.endswith(".pt"):
                raise _refuse(path, f"a pickled legacy weight file ({name})")
            if name.endswith(("_weights_config.json", "_constants_config.json")):
                constants = name.endswith("_constants_config.json")
                for fqn, entry in _config_entries(archive, name, path).items():
                    if entry.get("use_pickle") is not False:
                        raise _refuse(path, f"a pickled entry '{fqn}' ({name})")
                    if constants and not str(entry.get("path_name", "")).startswith(_TENSOR_PREFIX):
                        raise _refuse(path, f"a pickled object '{fqn}' ({name})")


@contextmanager
def weights_only_loads():
    """Every torch.load in the block is weights-only, whatever its caller asked for."""
    original = torch.load

    def load(*args, **kwargs):
        kwargs["weights_only"] = True
        return original(*args, **kwargs)

    with patched((torch, "load", load)):
        yield
