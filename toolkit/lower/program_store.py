"""A compiled Program on disk, so later runs (deploy, bench, another process) reuse it.

OUT/VARIANT/program.json holds the cache key and every field of the Program; the host graph is in
host_graph.json and each delegate's vela_bin_stream in delegateN.bin next to it. A folder whose
key differs from the requested one is not reused. program.json lists a SHA-256 of every other
file in the folder when it was written; a folder where one is missing or changed is not reused
either (load_stored_program says why), so a damaged store is compiled again instead of crashing.

Checksums show a file is the one listed, not who wrote the list: anyone who can write the folder
(a shared ETK_CACHE_DIR) can change a file and recompute them. So what a store holds is read as
data: the host graph calls only allow-listed operators (host_graph.py), and each delegate's TOSA
graph is run by the TOSA reference model in a child process before this one reads it natively
(tosa_probe.py). docs/report-format.md, "What a stored program may hold", says what is trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from ..artifacts import (
    CpuOp,
    Delegate,
    FusionDecision,
    LayerEstimate,
    Program,
    RewriteRecord,
    TensorQuant,
    TensorSpec,
    VelaEstimate,
)
from ..npu import NpuConfig
from ..safe_paths import UnsafeName, member, plain_name
from .tosa_probe import ProbeFailed, probe_tosa_files

PROGRAM_FILE = "program.json"
HOST_GRAPH_FILE = "host_graph.json"
STORE_VERSION = 3  # 2: per-file checksums; 3: host graph constants as raw bytes, allow-listed ops


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): _sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != PROGRAM_FILE
    }


class StoreDamaged(Exception):
    """A stored program that cannot be trusted; the message says what is wrong."""


def save_program(program: Program, folder: Path, key: str) -> None:
    """Write program's description into folder (the staging folder before it is moved in place)."""
    delegates = []
    for d in program.delegates:
        assert d.tosa_path is not None  # the programs stored are compiled from TOSA (build_variant)
        (folder / f"delegate{d.index}.bin").write_bytes(d.payload)
        entry = asdict(d)
        entry.pop("payload")
        entry["tosa_path"] = d.tosa_path.name
        entry["vela_npz_path"] = str(d.vela_npz_path.relative_to(program.out_dir))
        delegates.append(entry)
    data = asdict(program)
    data.pop("graph_module")
    from .host_graph import save_host_graph  # torch: only when a program is stored

    save_host_graph(program.graph_module, folder / HOST_GRAPH_FILE)
    data.update(
        store_version=STORE_VERSION,
        cache_key=key,
        delegates=delegates,
        out_dir=None,
        pte_path=program.pte_path.name,
        files=_checksums(folder),
    )
    (folder / PROGRAM_FILE).write_text(json.dumps(data, indent=1))


def _quant(entry) -> TensorQuant | None:
    return TensorQuant(**entry) if entry else None


def _delegate(entry: dict, folder: Path) -> Delegate:
    index = entry["index"]
    if type(index) is not int:
        raise ValueError(f"delegate index {index!r}")
    estimate = entry["estimate"]
    if estimate is not None:
        estimate = VelaEstimate(
            **{**estimate, "layers": tuple(LayerEstimate(**layer) for layer in estimate["layers"])}
        )
    return Delegate(
        index=index,
        tosa_path=folder / plain_name(entry["tosa_path"]),
        vela_npz_path=member(folder, entry["vela_npz_path"]),
        payload=member(folder, f"delegate{index}.bin").read_bytes(),
        tosa_ops=entry["tosa_ops"],
        npu_ops=entry["npu_ops"],
        command_ops=entry["command_ops"],
        estimate=estimate,
        inputs=tuple(TensorQuant(**q) for q in entry["inputs"]),
        outputs=tuple(TensorQuant(**q) for q in entry["outputs"]),
    )


def _check_files(folder: Path, files) -> None:
    if not isinstance(files, dict) or not files:
        raise StoreDamaged("it has no list of files")
    for name, digest in files.items():
        try:
            path = member(folder, name)
        except UnsafeName as exc:
            raise StoreDamaged(str(exc)) from None
        if _sha256(path) != digest:
            raise StoreDamaged(f"{name} does not match its checksum")


def _read_store(folder: Path) -> dict | None:
    if not os.path.lexists(folder / PROGRAM_FILE):
        return None
    try:
        data = json.loads(member(folder, PROGRAM_FILE).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnsafeName as exc:
        raise StoreDamaged(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise StoreDamaged(f"{PROGRAM_FILE} is unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise StoreDamaged(f"{PROGRAM_FILE} is not a JSON object")
    return data


def _check_delegate_calls(program: Program) -> None:
    from .host_graph import delegate_calls

    calls = delegate_calls(program.graph_module)
    if calls != len(program.delegates):
        raise StoreDamaged(
            f"{HOST_GRAPH_FILE} calls {calls} delegates, {PROGRAM_FILE} lists "
            f"{len(program.delegates)}"
        )


def _checked_program(folder: Path, data: dict) -> Program:
    _check_files(folder, data.get("files"))
    try:
        program = _program(folder, data)
        _check_delegate_calls(program)
        probe_tosa_files([d.tosa_path for d in program.delegates if d.tosa_path is not None])
        return program
    except (UnsafeName, ProbeFailed) as exc:
        raise StoreDamaged(str(exc)) from None
    except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
        raise StoreDamaged(f"{PROGRAM_FILE} is incomplete ({type(exc).__name__}: {exc})") from None


def load_stored_program(folder: Path, key: str | None = None) -> Program | None:
    """The program stored in folder if it was compiled under key (any key: None, as for
    `etk log --program`), else None. StoreDamaged if it is one but a file is missing, changed
    or unreadable."""
    data = _read_store(folder)
    if data is None or data.get("store_version") != STORE_VERSION:
        return None
    if key is not None and data.get("cache_key") != key:
        return None
    return _checked_program(folder, data)


def copy_stored_program(source: Path, staging: Path) -> bool:
    """Copy the program stored in source (its program.json and the files it lists, nothing a run
    added later) into staging; False if source no longer holds one, or lists a name that is not
    a regular file inside it (safe_paths.member: no `..`, no link)."""
    try:
        data = _read_store(source)
    except StoreDamaged:
        return False
    if data is None or not isinstance(data.get("files"), dict):
        return False
    try:
        for name in [*data["files"], PROGRAM_FILE]:
            origin = member(source, name)
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, staging / name, follow_symlinks=False)
    except (OSError, UnsafeName):
        return False
    return True


def _program(folder: Path, data: dict) -> Program:
    from .host_graph import load_host_graph  # torch: only when a program is loaded

    return Program(
        variant=data["variant"],
        model_name=data["model_name"],
        npu=NpuConfig(**data["npu"]),
        out_dir=folder,
        pte_path=member(folder, data["pte_path"]),
        delegates=tuple(_delegate(d, folder) for d in data["delegates"]),
        cpu_ops=tuple(CpuOp(**op) for op in data["cpu_ops"]),
        vela_flags=tuple(data["vela_flags"]),
        input_specs=tuple(TensorSpec(tuple(s["shape"]), s["dtype"]) for s in data["input_specs"]),
        output_specs=tuple(TensorSpec(tuple(s["shape"]), s["dtype"]) for s in data["output_specs"]),
        input_quant=tuple(_quant(q) for q in data["input_quant"]),
        output_quant=tuple(_quant(q) for q in data["output_quant"]),
        decisions=tuple(FusionDecision(**d) for d in data["decisions"]),
        rewrites=tuple(RewriteRecord(**r) for r in data["rewrites"]),
        graph_module=load_host_graph(folder / HOST_GRAPH_FILE),
        timings={},
    )


def load_output_interface(
    folder: Path,
) -> tuple[tuple[TensorSpec, ...], tuple[TensorQuant | None, ...]] | None:
    """The stored program's output specs and quantization, without loading its graphs."""
    try:
        data = json.loads(member(folder, PROGRAM_FILE).read_text())
        return (
            tuple(TensorSpec(tuple(s["shape"]), s["dtype"]) for s in data["output_specs"]),
            tuple(_quant(q) for q in data["output_quant"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # UnsafeName: a ValueError
        return None
