"""Our cycle model: computed from what each executed operation did, never from Vela's numbers.

Structure learnt from Vela's legacy estimator (npu_performance.py), written from scratch:
per OFM block, MAC-array cycles (u-blocks x kernel steps x IFM depth steps, bounded below by the
weight decoder) and output-stage cycles (per element, by accumulator width, pooling type and the
activation the ACTIVATION register selects) pipeline against each other; memory traffic per
region costs bytes / bandwidth + latency of the memory the Vela system config maps it to. The
op takes the longer of compute and memory. Only geometry, block configuration, data widths,
activation type and byte counts enter: zero points, clip bounds and scales cannot change cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .records import OpRecord

# OFM u-block (h, w, c) per configuration.
UBLOCK = {
    "ethos-u55-32": (1, 1, 4), "ethos-u55-64": (1, 1, 8), "ethos-u55-128": (1, 2, 8),
    "ethos-u55-256": (2, 2, 8), "ethos-u65-256": (2, 2, 8),
}
# Output-stage cycles per element: 32-bit acc, 40-bit acc, max pool; activation: LUT/tanh/sigmoid.
_OUTPUT = {
    "ethos-u55-32": (2.0, 3.0, 1.0, 1.0), "ethos-u55-64": (1.0, 1.5, 0.5, 1.0),
    "ethos-u55-128": (0.5, 0.75, 0.25, 1.0), "ethos-u55-256": (0.25, 0.375, 0.125, 1.0),
    "ethos-u65-256": (0.25, 0.375, 0.125, 1.0),
}
_OP_OVERHEAD = 8  # command processing per operation


@dataclass(frozen=True)
class MemoryPort:
    name: str  # "Sram", "OffChipFlash", "Dram"
    bytes_per_cycle: float
    read_latency: int
    write_latency: int


@dataclass(frozen=True)
class MemorySystem:
    regions: dict  # region -> MemoryPort

    def port(self, region: int) -> MemoryPort:
        return self.regions.get(region, self.regions[1])


@lru_cache(maxsize=16)
def memory_system(accelerator: str, system_config: str, memory_mode: str) -> MemorySystem:
    """Bandwidths and latencies of the Vela system config, per region (0 const, 1 arena, 2 cache)."""
    from ethosu.vela.architecture_features import ArchitectureFeatures, MemPort

    arch = ArchitectureFeatures(
        vela_config_files=[_ini_path()], accelerator_config=accelerator,
        system_config=system_config, memory_mode=memory_mode, max_blockdep=3,
        verbose_config=False, arena_cache_size=None)

    def port(mem_port: MemPort) -> MemoryPort:
        area = arch._mem_port_mapping(mem_port)
        return MemoryPort(area.name, float(arch.memory_bandwidths_per_cycle[area]),
                          int(arch.memory_latency[area][0]), int(arch.memory_latency[area][1]))

    return MemorySystem({0: port(arch.const_mem_area), 1: port(arch.arena_mem_area),
                         2: port(arch.cache_mem_area)})


def _ini_path() -> str:
    from pathlib import Path

    import ethosu.vela

    return str(Path(ethosu.vela.__file__).parent.parent / "config_files" / "Arm" / "vela.ini")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _compute_cycles(rec: OpRecord, accelerator: str) -> int:
    oh, ow, oc = rec.ofm_shape
    bh, bw, bc = min(rec.block[0], oh), min(rec.block[1], ow), min(rec.block[2], oc)
    uh, uw, uc = UBLOCK[accelerator]
    n_blocks = _ceil(oh, bh) * _ceil(ow, bw) * _ceil(oc, bc)
    ublk_xy = _ceil(bh, uh) * _ceil(bw, uw)
    ublk_z = _ceil(bc, uc)
    kh, kw = rec.kernel[0], rec.kernel[1]
    elems = kh * kw
    wide = 2 if rec.ifm_elem_size > 1 else 1
    weight_decode = 4 * uc
    if rec.kind == "conv":
        if rec.part_kernel_first:
            steps = _ceil(elems, 4 // wide) * _ceil(rec.ifm_depth, 8)
        else:
            steps = elems * _ceil(rec.ifm_depth, 32 // wide)
        mac = max(weight_decode, 4 * ublk_xy) * steps * ublk_z
    elif rec.kind == "depthwise":
        mac = max(weight_decode, 4 * ublk_xy * wide) * _ceil(elems, 4) * ublk_z
    else:
        mac = max(4, elems) * ublk_xy * ublk_z * (wide if accelerator != "ethos-u55-32" else 1)
    acc32, acc40, maxpool, lut = _OUTPUT[accelerator]
    per_elem = acc40 if rec.acc_40bit else (maxpool if rec.kind == "pool.max" else acc32)
    if rec.activation != 0:
        per_elem = max(per_elem, lut)
    out = math.ceil(per_elem * bh * bw * bc)
    return max(mac, out) * n_blocks + min(mac, out)


def _memory_cycles(rec: OpRecord, memory: MemorySystem, with_latency: bool) -> int:
    reread_ifm = rec.kind == "conv"
    oh, ow, oc = rec.ofm_shape
    bh, bw, bc = (max(1, min(b, s)) for b, s in zip(rec.block, rec.ofm_shape))
    depth_blocks = _ceil(oc, bc) if oc else 1
    per_port: dict[str, float] = {}
    latency: dict[str, int] = {}
    for i, (region, nbytes) in enumerate(rec.bytes_read):
        # First read is the IFM; the NPU fetches it again for every OFM depth block of a conv.
        factor = depth_blocks if (i == 0 and reread_ifm) else 1
        port = memory.port(region)
        per_port[port.name] = per_port.get(port.name, 0.0) + nbytes * factor / port.bytes_per_cycle
        latency[port.name] = max(latency.get(port.name, 0), port.read_latency)
    for region, nbytes in rec.bytes_written:
        port = memory.port(region)
        per_port[port.name] = per_port.get(port.name, 0.0) + nbytes / port.bytes_per_cycle
        latency[port.name] = max(latency.get(port.name, 0), port.write_latency)
    # Block operations overlap their transfers with compute; a DMA waits for its first beat.
    return max((math.ceil(c) + (latency[name] if with_latency else 0)
                for name, c in per_port.items()), default=0)


def op_cycles(rec: OpRecord, accelerator: str, memory: MemorySystem) -> int:
    if rec.kind == "dma":
        return _memory_cycles(rec, memory, with_latency=True)
    mem = _memory_cycles(rec, memory, with_latency=False)
    return max(_compute_cycles(rec, accelerator), mem) + _OP_OVERHEAD
