"""SUITE.toml -> Suite, and the cross product of runs it describes.

name = "zoo"
models = ["zoo:*", "models/kws.py:Net"]   # zoo names may use shell wildcards; files
                                          # (path.py:Name, .pt2, .tflite) are relative to
                                          # the directory etk runs in
targets = ["corstone-300"]
npus = ["ethos-u55-128", "ethos-u65-256"]  # optional: each target's default
fusion = ["on", "off"]                      # optional: both (a .tflite model: one run, as is)
quant = ["int8", "a16w8"]                   # optional: int8 (a .tflite model: as is)
runners = ["sim"]                           # fvp, sim, tosa-ref, auto, farm (docs/farm.md)
[settings]                                  # optional
seed = 0
eval_samples = 8
calibration_samples = 8
[[vela]]                                    # optional: Vela's defaults for the target
name = "size"
optimise = "Size"                           # Performance or Size
memory_mode = "Shared_Sram"
system_config = "Ethos_U55_High_End_Embedded"
flags = ["--verbose-allocation"]
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..artifacts import QUANTS
from ..errors import UserError
from ..job import check_quant
from ..resolve import FUSION_CHOICES, FUSION_VARIANT, SUITE_RUNNER_CHOICES, is_tflite
from ..toml_table import TomlTable, load_toml

if TYPE_CHECKING:
    from ..artifacts import Quant, Variant

TFLITE: Variant = "tflite"  # the one variant of a .tflite model: Vela compiles the file as it is
OPTIMISE = ("Performance", "Size")


@dataclass(frozen=True)
class VelaOptions:
    name: str = "default"
    optimise: str | None = None
    memory_mode: str | None = None
    system_config: str | None = None
    flags: tuple[str, ...] = ()

    def extra_flags(self) -> tuple[str, ...]:
        return ((f"--optimise={self.optimise}",) if self.optimise else ()) + self.flags


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    eval_samples: int = 8
    calibration_samples: int = 8


@dataclass(frozen=True)
class RunSpec:
    """One run of the cross product: one model, one variant, one NPU, one option set, one runner."""

    model: str
    target: str
    npu: str
    variant: Variant  # "fused" or "unfused"; "tflite" for a .tflite model
    vela: VelaOptions
    runner: str
    settings: Settings
    model_sha256: str | None = None  # a file model's contents when the suite was expanded
    quant: Quant = "int8"

    @property
    def label(self) -> str:
        quant = "" if self.quant == "int8" else f" quant={self.quant}"
        return (
            f"{self.model} {self.variant} {self.npu} vela={self.vela.name} "
            f"runner={self.runner}{quant}"
        )


@dataclass(frozen=True)
class Suite:
    name: str
    source: Path
    models: tuple[str, ...]
    targets: tuple[str, ...]
    npus: tuple[str, ...]  # empty: each target's default NPU
    variants: tuple[Variant, ...]
    vela: tuple[VelaOptions, ...]
    runners: tuple[str, ...]
    settings: Settings
    quants: tuple[Quant, ...] = ("int8",)

    @property
    def size_bound(self) -> int:
        """At most how many runs the suite expands to (its axes' product), without expanding."""
        return math.prod(
            len(axis) or 1
            for axis in (
                self.models,
                self.targets,
                self.npus,
                self.variants,
                self.vela,
                self.runners,
                self.quants,
            )
        )

    def runs(self) -> tuple[RunSpec, ...]:
        from ..targets import load_target

        specs = []
        hashes: dict[str, str | None] = {}  # each file read once per expansion
        for target_name in self.targets:
            target = load_target(target_name)
            npus = [n for n in self.npus if n in target.supported_npus] or (
                [] if self.npus else [target.default_npu]
            )
            for model in self.models:
                variants = (TFLITE,) if is_tflite(model) else self.variants
                quants: tuple[Quant, ...] = ("int8",) if is_tflite(model) else self.quants
                if model not in hashes:
                    hashes[model] = model_file_sha256(model)
                for npu, quant, variant, vela, runner in itertools.product(
                    npus, quants, variants, self.vela, self.runners
                ):
                    specs.append(
                        RunSpec(
                            model,
                            target_name,
                            npu,
                            variant,
                            vela,
                            runner,
                            self.settings,
                            hashes[model],
                            quant,
                        )
                    )
        return tuple(specs)


def model_file_sha256(model: str) -> str | None:
    """sha256 of a file model's bytes; None for zoo models and for a file that is not there (the
    run then fails saying so)."""
    from ..models.loader import model_file  # here: the loader imports torch

    path = model_file(model)
    if path is None or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _expand_models(models: tuple[str, ...], reader: TomlTable) -> tuple[str, ...]:
    from ..models.zoo import zoo_names

    names = zoo_names()
    expanded: list[str] = []
    for spec in models:
        if spec.startswith("zoo:") and any(c in spec for c in "*?["):
            matches = [f"zoo:{n}" for n in names if fnmatch.fnmatchcase(n, spec[4:])]
            if not matches:
                raise reader.fail("models", f"pattern '{spec}' matches no zoo model")
            expanded += [m for m in matches if m not in expanded]
        elif spec not in expanded:
            _check_model_exists(spec, names, reader)
            expanded.append(spec)
    return tuple(expanded)


def _check_model_exists(spec: str, zoo: list[str], reader: TomlTable) -> None:
    from ..models.loader import model_file

    if spec.startswith("zoo:"):
        if spec[4:] not in zoo:
            raise reader.fail(
                "models",
                f"names '{spec}', which is not in the zoo: use one of {', '.join(sorted(zoo))}",
            )
        return
    path = model_file(spec)
    if path is None or not path.is_file():
        raise reader.fail(
            "models",
            f"names '{spec}', but {path} is not a file (paths are "
            "relative to the current directory)",
        )


def _vela_options(reader: TomlTable) -> tuple[VelaOptions, ...]:
    if "vela" not in reader.data:
        return (VelaOptions(),)
    tables = reader.get("vela", list, "an array of tables [[vela]]")
    options = []
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            raise reader.fail(f"vela[{i}]", "must be a table")
        sub = reader.sub(table, f"vela[{i}].")
        unknown = set(table) - {"name", "optimise", "memory_mode", "system_config", "flags"}
        if unknown:
            raise sub.fail(
                sorted(unknown)[0],
                "is not a Vela option key (name, optimise, memory_mode, system_config, flags)",
            )
        optimise = sub.get("optimise", str, "Performance or Size", None)
        if optimise is not None and optimise not in OPTIMISE:
            raise sub.fail("optimise", f"is {optimise!r}, expected Performance or Size")
        options.append(
            VelaOptions(
                name=sub.get("name", str, "a string naming this option set", f"vela{i}"),
                optimise=optimise,
                memory_mode=sub.get("memory_mode", str, "a Vela memory mode", None),
                system_config=sub.get("system_config", str, "a Vela system config", None),
                flags=sub.strings("flags", default=[]),
            )
        )
    if len({o.name for o in options}) != len(options):
        raise reader.fail("vela", "has two option sets with the same name")
    return tuple(options)


def _settings(reader: TomlTable) -> Settings:
    table = reader.get("settings", dict, "a table", default={})
    sub = reader.sub(table, "settings.")
    values = {
        key: sub.get(key, int, "an integer", default)
        for key, default in (("seed", 0), ("eval_samples", 8), ("calibration_samples", 8))
    }
    for key in ("eval_samples", "calibration_samples"):
        if values[key] < 1:
            raise sub.fail(key, f"is {values[key]}, expected at least 1")
    return Settings(**values)


KNOWN_KEYS = {
    "name",
    "models",
    "targets",
    "npus",
    "fusion",
    "quant",
    "runners",
    "settings",
    "vela",
}


def load_suite(path: Path) -> Suite:
    from ..targets import load_target

    path = Path(path)
    data = load_toml(path, "suite file")
    reader = TomlTable(data, path, "suite file")
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        raise reader.fail(
            sorted(unknown)[0], f"is unknown; a suite has {', '.join(sorted(KNOWN_KEYS))}"
        )
    models = reader.strings("models")
    targets = reader.strings("targets", default=["corstone-300"])
    loaded = []
    for name in targets:
        try:
            loaded.append(load_target(name))
        except UserError as exc:
            raise reader.fail("targets", f"names a target that does not load: {exc}") from None
    npus = reader.strings("npus", default=[])
    for npu in npus:
        if not any(npu in t.supported_npus for t in loaded):
            raise reader.fail(
                "npus", f"has {npu}, which none of the targets ({', '.join(targets)}) offers"
            )
    fusion = reader.strings("fusion", default=FUSION_CHOICES, choices=FUSION_CHOICES)
    return Suite(
        name=reader.get("name", str, "a string", path.stem),
        source=path,
        models=_expand_models(models, reader),
        targets=targets,
        npus=npus,
        variants=tuple(FUSION_VARIANT[f] for f in fusion),
        vela=_vela_options(reader),
        runners=reader.strings("runners", default=["auto"], choices=SUITE_RUNNER_CHOICES),
        settings=_settings(reader),
        quants=tuple(check_quant(q) for q in reader.strings("quant", ["int8"], QUANTS)),
    )
