"""Targets as data: loading and validating targets/*.toml.

A target file names the NPU configurations a system offers, the Vela system config and memory
mode that match its runtime build, and how to run on it (an FVP, a board). Users add a target by
adding a file to targets/ or to a folder named in ETK_TARGETS_PATH.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import UserError
from .npu import (
    DEFAULT_VELA_SYSTEM,
    NpuConfig,
    accelerator_family,
    check_accelerator,
    vendor_npu_config,
)
from .toml_table import TomlTable, load_toml

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """A data folder shipped with the package (targets, fvp_configs).

    Installed: toolkit/data/NAME (mapped in pyproject.toml). From a source tree or an
    editable install: the folder at the top of the repository.
    """
    for candidate in (_PACKAGE_DIR / "data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"toolkit data folder '{name}' is missing from the installation")


@dataclass(frozen=True)
class FvpSpec:
    """How to run this target on an Arm Fixed Virtual Platform."""

    binaries: dict[str, str]  # NPU family ("ethos-u55") -> FVP executable name
    num_macs_param: str  # e.g. "ethosu.num_macs"
    cpu_prefix: str  # semihosting parameters live under this component, e.g. "cpu0"
    config_file: Path | None  # FVP parameter file (-f), from fvp_configs/
    parameters: dict[str, str | int | bool]  # extra -C parameters
    time_limit_s: int
    runner_elf: str | None  # semihosting executor runner; --runner-elf / ETK_RUNNER_ELF win

    def binary_for(self, accelerator: str) -> str:
        family = accelerator_family(accelerator)
        try:
            return self.binaries[family]
        except KeyError:
            raise UserError(
                f"this target's FVP has no {family} model; "
                f"it has {', '.join(sorted(self.binaries))}"
            ) from None


ResetMethod = Literal["flash", "command", "manual"]
BoardInputs = Literal["bundled", "ones"]
BoardTestSets = Literal["first", "all"]
RESET_METHODS: tuple[ResetMethod, ...] = ("flash", "command", "manual")
BOARD_PLACEHOLDERS = ("pte", "bpte", "elf", "port")


@dataclass(frozen=True)
class BoardSpec:
    """How to build, flash, start and listen to a real board ([board] in a target file).

    Commands are templates, one string per step, split like a shell line and then filled in
    per argument: {pte} the program, {bpte} the BundleIO program, {elf} the runner image,
    {port} the serial port. Use `sh -c '...'` in a step for pipes or redirection.
    """

    name: str  # the board as a person would name it: "Alif Ensemble E7 DevKit, HP core"
    port: str | None  # the UART the runner prints on; --port wins
    baud: int
    flash_command: tuple[str, ...]
    build_command: tuple[str, ...]  # empty: the image ({elf}) is built once, by hand
    image: str | None  # a prebuilt runner image for {elf}; --runner-elf wins
    reset: ResetMethod  # flash: flashing starts the program; command: reset_command; manual
    reset_command: tuple[str, ...]
    usb_ids: tuple[str, ...]  # "VID:PID" of the board's USB serial bridge, for `etk ports`
    build_time_limit_s: int
    flash_time_limit_s: int
    banner_time_limit_s: float  # first output after flash or reset
    run_time_limit_s: float  # from the first output to the end marker
    reconnect_time_limit_s: float  # for the port to come back after a disconnect
    retries: int  # re-runs after garbled output, dropped lines or a reset mid-run
    # bundled: the image reads the inputs from the .bpte and checks the outputs (BundleIO);
    # ones: it runs the model on all-ones inputs (ExecuTorch's Zephyr hello-executorch sample)
    inputs: BoardInputs = "bundled"
    # first: the image runs test set 0 of the bundle (ExecuTorch's arm_executor_runner:
    # testset_idx = 0), so each sample is one flash; all: it loops over every test set
    test_sets: BoardTestSets = "first"


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    source: Path
    default_npu: str
    supported_npus: tuple[str, ...]
    # NPU family -> (Vela system config, memory mode) as the runtime image was built.
    vela_system: dict[str, tuple[str, str]]
    fvp: FvpSpec | None = None
    board_spec: BoardSpec | None = None
    vela_config: str | None = None  # [npu.vela] config: a vendor's Vela ini (else Vela's own)
    sram_bytes: int | None = None  # SRAM the runtime image gives the NPU; None: not checked

    def npu(
        self,
        accelerator: str | None = None,
        system_config: str | None = None,
        memory_mode: str | None = None,
        vela_config: str | Path | None = None,
    ) -> NpuConfig:
        """The NPU configuration to compile for, with user overrides applied (--vela-config
        wins over the target's [npu.vela] config)."""
        accelerator = accelerator or self.default_npu
        check_accelerator(accelerator)
        if accelerator not in self.supported_npus:
            raise UserError(
                f"target '{self.name}' has no {accelerator}: use one of "
                f"{', '.join(self.supported_npus)} (or add a target file in targets/)"
            )
        family = accelerator_family(accelerator)
        default_system, default_memory = self.vela_system.get(family, DEFAULT_VELA_SYSTEM[family])
        npu = NpuConfig(accelerator, system_config or default_system, memory_mode or default_memory)
        if vela_config is not None:
            return vendor_npu_config(npu, Path(vela_config), "--vela-config")
        if self.vela_config is not None:
            path = Path(os.path.expandvars(self.vela_config)).expanduser()
            path = path if path.is_absolute() else self.source.parent / path
            return vendor_npu_config(npu, path, f"npu.vela.config in {self.source}")
        return npu


def _parse_fvp(table: TomlTable) -> FvpSpec:
    config_name = table.get("config_file", str, "a file name in fvp_configs/", default=None)
    config_file = None
    if config_name is not None:
        # next to the target file first (a target of the user's own, its folder wherever etk
        # runs from), then the shipped fvp_configs/; absolute either way (the FVP runs elsewhere)
        config_file = (table.path.parent / config_name).resolve()
        if not config_file.is_file():
            config_file = (data_dir("fvp_configs") / config_name).resolve()
        if not config_file.is_file():
            raise UserError(
                f"target file {table.path}: fvp.config_file '{config_name}' "
                f"not found in fvp_configs/ or next to the target file"
            )
    params = table.get("parameters", dict, "a table of FVP parameters", default={})
    return FvpSpec(
        binaries=table.str_dict("binaries") or {},
        num_macs_param=table.get("num_macs_param", str, "an FVP parameter name"),
        cpu_prefix=table.get("cpu_prefix", str, "an FVP component name like 'cpu0'"),
        config_file=config_file,
        parameters=dict(params),
        time_limit_s=table.get("time_limit_s", int, "an integer number of seconds", default=600),
        runner_elf=table.get("runner_elf", str, "a path to the executor runner ELF", default=None),
    )


def _commands(table: TomlTable, key: str, required: bool) -> tuple[str, ...]:
    value = table.get(
        key, (str, list), "a command template or a list of them", default=... if required else []
    )
    steps = [value] if isinstance(value, str) else value
    if not all(isinstance(step, str) and step.strip() for step in steps):
        raise table.wrong(key, "a command template or a list of them", value)
    for step in steps:
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(step) if name is not None}
        except ValueError as exc:
            raise UserError(
                f"target file {table.path}: key '{table.prefix}{key}': {exc} in {step!r}"
            ) from None
        unknown = sorted(fields - set(BOARD_PLACEHOLDERS))
        if unknown:
            raise UserError(
                f"target file {table.path}: key '{table.prefix}{key}' uses "
                f"{{{unknown[0]}}}; the placeholders are "
                f"{', '.join('{' + p + '}' for p in BOARD_PLACEHOLDERS)}"
            )
    return tuple(steps)


def _parse_board(table: TomlTable) -> BoardSpec:
    reset = table.get("reset", str, f"one of {', '.join(RESET_METHODS)}", default="flash")
    if reset not in RESET_METHODS:
        raise table.wrong("reset", f"one of {', '.join(RESET_METHODS)}", reset)
    reset_command = _commands(table, "reset_command", required=reset == "command")
    seconds = (int, float)
    usb_ids = table.str_list("usb_ids") if "usb_ids" in table.data else ()
    for usb_id in usb_ids:
        vid, sep, pid = usb_id.partition(":")
        if not (
            sep and len(vid) == len(pid) == 4 and all(c in string.hexdigits for c in vid + pid)
        ):
            raise table.wrong("usb_ids", "a list of 'VID:PID' in hex, like '0403:6011'", usb_id)
    retries = table.get("retries", int, "a whole number of re-runs", default=2)
    inputs = table.get("inputs", str, "bundled or ones", default="bundled")
    if inputs not in ("bundled", "ones"):
        raise table.wrong("inputs", "bundled or ones", inputs)
    if retries < 0:
        raise table.wrong("retries", "a whole number of re-runs", retries)
    test_sets = table.get("test_sets", str, "first or all", default="first")
    if test_sets not in ("first", "all"):
        raise table.wrong("test_sets", "first or all", test_sets)
    return BoardSpec(
        name=table.get("name", str, "the board's name"),
        port=table.get("port", str, "a serial port like '/dev/ttyACM0'", default=None),
        baud=table.get("baud", int, "a baud rate like 115200", default=115200),
        flash_command=_commands(table, "flash", required=True),
        build_command=_commands(table, "build", required=False),
        image=table.get("image", str, "a path to the runner image", default=None),
        reset=reset,
        reset_command=reset_command,
        usb_ids=tuple(u.lower() for u in usb_ids),
        build_time_limit_s=table.get("build_time_limit_s", int, "whole seconds", default=1800),
        flash_time_limit_s=table.get("flash_time_limit_s", int, "whole seconds", default=300),
        banner_time_limit_s=float(table.get("banner_time_limit_s", seconds, "seconds", default=30)),
        run_time_limit_s=float(table.get("run_time_limit_s", seconds, "seconds", default=300)),
        reconnect_time_limit_s=float(
            table.get("reconnect_time_limit_s", seconds, "seconds", default=10)
        ),
        retries=retries,
        inputs=inputs,
        test_sets=test_sets,
    )


def load_target_file(path: Path) -> Target:
    top = TomlTable(load_toml(path, "target file"), path, "target file")
    npu = top.table("npu")
    supported = npu.str_list("supported")
    for accelerator in supported:
        check_accelerator(accelerator)
    default_npu = npu.get("default", str, "an NPU configuration like 'ethos-u55-128'")
    if default_npu not in supported:
        raise UserError(f"target file {path}: npu.default '{default_npu}' is not in npu.supported")
    vela_system = {}
    vela = npu.optional_table("vela")
    vela_config = None
    if vela is not None:
        vela_config = vela.get("config", str, "the path of a Vela .ini file", default=None)
        for family in (k for k in vela.data if k != "config"):
            fam = vela.table(family)
            vela_system[family] = (
                fam.get("system_config", str, "a Vela system config name"),
                fam.get("memory_mode", str, "a Vela memory mode name"),
            )
    fvp = top.optional_table("fvp")
    board = top.get("board", dict, "a table", default=None)
    memory = top.optional_table("memory")
    sram = memory.get("sram_bytes", int, "a size in bytes") if memory is not None else None
    return Target(
        name=top.get("name", str, "the target's name"),
        description=top.get("description", str, "a one-line description", default=""),
        source=path,
        default_npu=default_npu,
        supported_npus=supported,
        vela_system=vela_system,
        fvp=_parse_fvp(fvp) if fvp is not None else None,
        board_spec=_parse_board(top.sub(board, "board.")) if board is not None else None,
        vela_config=vela_config,
        sram_bytes=sram,
    )


def target_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("ETK_TARGETS_PATH", "").split(os.pathsep) if p]
    return extra + [data_dir("targets")]


def list_targets() -> list[Target]:
    seen: dict[str, Target] = {}
    for folder in target_dirs():
        for path in sorted(folder.glob("*.toml")):
            target = load_target_file(path)
            seen.setdefault(target.name, target)
    return list(seen.values())


def load_target(name: str) -> Target:
    """A target by name, or from a .toml path."""
    if name.endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise UserError(f"target file {name} not found")
        return load_target_file(path)
    for folder in target_dirs():
        path = folder / f"{name}.toml"
        if path.is_file():
            return load_target_file(path)
    known = ", ".join(t.name for t in list_targets())
    raise UserError(f"unknown target '{name}': use one of {known} or a path to a .toml file")
