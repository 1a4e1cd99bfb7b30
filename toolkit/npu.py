"""NPU configurations: names, MAC counts and the Vela defaults for each family."""

from __future__ import annotations

import configparser
import functools
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

ARM_VELA_INI = "Arm/vela.ini"  # Vela's own configurations, in its config_files folder

# Accelerator configurations Vela 5.1 accepts (`vela --help`).
KNOWN_ACCELERATORS = (
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
    "ethos-u85-128",
    "ethos-u85-256",
    "ethos-u85-512",
    "ethos-u85-1024",
    "ethos-u85-2048",
)

# ExecuTorch's EthosUCompileSpec defaults per family (system config, memory mode).
DEFAULT_VELA_SYSTEM = {
    "ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only"),
}


def accelerator_family(accelerator: str) -> str:
    """ "ethos-u55-128" -> "ethos-u55"."""
    return accelerator.rsplit("-", 1)[0]


def accelerator_macs(accelerator: str) -> int:
    """ "ethos-u55-128" -> 128, the MACs per cycle."""
    return int(accelerator.rsplit("-", 1)[1])


@dataclass(frozen=True)
class NpuConfig:
    """One NPU as Vela sees it: accelerator, system config and memory mode."""

    accelerator: str  # e.g. "ethos-u55-128"
    system_config: str
    memory_mode: str
    config_ini: str = ARM_VELA_INI  # or the path of a vendor's ini (--vela-config)

    @property
    def family(self) -> str:
        return accelerator_family(self.accelerator)

    @property
    def macs(self) -> int:
        """MACs per cycle (the number in the accelerator name)."""
        return accelerator_macs(self.accelerator)

    @property
    def config_path(self) -> Path:
        """The .ini file itself (Arm/vela.ini is inside Vela's config_files)."""
        return vela_ini_path(self.config_ini)

    @property
    def vela_flags(self) -> tuple[str, ...]:
        return (
            f"--accelerator-config={self.accelerator}",
            f"--config={self.config_ini}",
            f"--system-config={self.system_config}",
            f"--memory-mode={self.memory_mode}",
        )


def check_accelerator(
    name: str, offered: tuple[str, ...] = KNOWN_ACCELERATORS, by: str = ""
) -> str:
    """name, if Vela knows it; else UserError suggesting the configurations of its family among
    offered (a target's NPUs, by: the target's name), or all of offered when none is."""
    if name not in KNOWN_ACCELERATORS:
        same_family = [a for a in offered if accelerator_family(a) == accelerator_family(name)]
        raise UserError(
            f"unknown NPU configuration '{name}': {f'{by} offers' if by else 'use one of'} "
            f"{', '.join(same_family or offered)}"
        )
    return name


def npu_config(
    accelerator: str, system_config: str | None = None, memory_mode: str | None = None
) -> NpuConfig:
    """An NpuConfig with the family's Vela defaults for whatever is not given."""
    check_accelerator(accelerator)
    default_system, default_memory = DEFAULT_VELA_SYSTEM[accelerator_family(accelerator)]
    return NpuConfig(accelerator, system_config or default_system, memory_mode or default_memory)


def vela_ini_path(config_ini: str) -> Path:
    """The file behind NpuConfig.config_ini: Vela's own, or a vendor file given by path."""
    if config_ini != ARM_VELA_INI:
        return Path(config_ini)
    import ethosu.vela

    return Path(ethosu.vela.__file__).parent.parent / "config_files" / ARM_VELA_INI


def vela_ini_sections(ini: Path) -> tuple[str, ...]:
    """The section names of a Vela ini file ("System_Config.X", "Memory_Mode.Y", ...), parsed
    once per version of the file (configparser.Error when it is not an ini file; () when it
    cannot be read)."""
    path = Path(ini).resolve()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return ()
    return _ini_sections(str(path), stamp)


@functools.cache
def _ini_sections(path: str, _mtime_ns: int) -> tuple[str, ...]:
    parser = configparser.ConfigParser()
    parser.read(path)
    return tuple(parser.sections())


def vendor_npu_config(npu: NpuConfig, ini: Path, what: str) -> NpuConfig:
    """npu compiled with a vendor's Vela ini (an absolute path); UserError unless the file holds
    npu's system config and memory mode. what names where the file came from."""
    ini = Path(ini).expanduser()
    if not ini.is_file():
        raise UserError(
            f"Vela config {ini} ({what}) not found: give the path of an existing "
            f".ini file (e.g. Alif's ensemble_vela.ini from "
            f"alifsemi/alif_ml-embedded-evaluation-kit scripts/vela/)"
        )
    try:
        sections = vela_ini_sections(ini)
    except configparser.Error as exc:
        raise UserError(
            f"Vela config {ini} ({what}) is not a valid ini file: {str(exc).splitlines()[0]}"
        ) from None
    for kind, name, flag in (
        ("System_Config", npu.system_config, "--system-config"),
        ("Memory_Mode", npu.memory_mode, "--memory-mode"),
    ):
        if f"{kind}.{name}" not in sections:
            known = [s.split(".", 1)[1] for s in sections if s.startswith(f"{kind}.")]
            raise UserError(
                f"Vela config {ini} ({what}) has no {kind} '{name}': pass {flag} "
                f"with one of {', '.join(known) or 'none'}"
            )
    return NpuConfig(npu.accelerator, npu.system_config, npu.memory_mode, str(ini.resolve()))
