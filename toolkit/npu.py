"""NPU configurations: names, MAC counts and the Vela defaults for each family."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

# Accelerator configurations Vela 5.1 accepts (`vela --help`).
KNOWN_ACCELERATORS = (
    "ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256",
    "ethos-u65-256", "ethos-u65-512",
    "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048",
)

# ExecuTorch's EthosUCompileSpec defaults per family (system config, memory mode).
DEFAULT_VELA_SYSTEM = {
    "ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only"),
}


@dataclass(frozen=True)
class NpuConfig:
    """One NPU as Vela sees it: accelerator, system config and memory mode."""

    accelerator: str  # e.g. "ethos-u55-128"
    system_config: str
    memory_mode: str
    config_ini: str = "Arm/vela.ini"

    @property
    def family(self) -> str:
        return self.accelerator.rsplit("-", 1)[0]

    @property
    def macs(self) -> int:
        """MACs per cycle (the number in the accelerator name)."""
        return int(self.accelerator.rsplit("-", 1)[1])

    def with_config_ini(self, path: str | Path) -> NpuConfig:
        """The same NPU with its system config and memory mode read from another Vela .ini."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"Vela config {path} not found: give the path of a .ini file")
        return dataclasses.replace(self, config_ini=str(path.resolve()))

    @property
    def config_path(self) -> Path:
        """The .ini file itself (names such as Arm/vela.ini are inside Vela's config_files)."""
        path = Path(self.config_ini)
        if path.is_absolute():
            return path
        import ethosu.vela

        return Path(ethosu.vela.__file__).parent.parent / "config_files" / path

    @property
    def vela_flags(self) -> tuple[str, ...]:
        return (
            f"--accelerator-config={self.accelerator}",
            f"--config={self.config_ini}",
            f"--system-config={self.system_config}",
            f"--memory-mode={self.memory_mode}",
        )


def check_accelerator(name: str) -> str:
    if name not in KNOWN_ACCELERATORS:
        raise UserError(
            f"unknown NPU configuration '{name}': use one of {', '.join(KNOWN_ACCELERATORS)}"
        )
    return name


def npu_config(accelerator: str, system_config: str | None = None,
               memory_mode: str | None = None) -> NpuConfig:
    """An NpuConfig with the family's Vela defaults for whatever is not given."""
    check_accelerator(accelerator)
    family = accelerator.rsplit("-", 1)[0]
    default_system, default_memory = DEFAULT_VELA_SYSTEM[family]
    return NpuConfig(accelerator, system_config or default_system, memory_mode or default_memory)
