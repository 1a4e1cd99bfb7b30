"""Memory: the regions (BASEP0-7 in hardware: 0 weights, 1 scratch, 2 fast scratch) and the
NPU's internal memory, the SHRAM, whose last 2 KB hold the activation lookup tables (LUT).

A DMA whose region register has bit 8 set moves to or from internal memory: its address is a
SHRAM byte address. The output stage reads LUT slot k (256 bytes) at LUT_BASE + 256 k; a table
of 32-bit entries spans four slots.
"""

from __future__ import annotations

import numpy as np

from .errors import RegionError

REGION_NAMES = {0: "weights", 1: "scratch", 2: "fast scratch"}
MEMORY_REGIONS = 8  # regions 0-7 (BASEP0-7); higher numbers are buffers inside the NPU
INTERNAL = -1  # region number the records use for the SHRAM
LUT_BYTES = 2048  # the last 2 KB of the SHRAM
LUT_SLOT_BYTES = 256


class Memory:
    def __init__(self, regions: dict[int, np.ndarray], internal_size: int = 0):
        self.regions = regions
        self.internal_size = internal_size
        self._internal: np.ndarray | None = None
        # per region, the end of the highest byte range checked: planning checks every access,
        # so a run needs no more of a region than this
        self.extent: dict[int, int] = {}
        self._addresses: dict[int, int] = {}

    def address(self, region: int) -> int:
        """Where a region's bytes start (for the native kernels)."""
        found = self._addresses.get(region)
        if found is None:
            buffer = self.internal if region == INTERNAL else self.regions[region]
            # the interface's address: .ctypes builds its object in Python
            found = self._addresses[region] = buffer.__array_interface__["data"][0]
        return found

    def size(self, region: int) -> int:
        """A region's bytes (what the native kernels check their descriptions against)."""
        return (self.internal if region == INTERNAL else self.regions[region]).nbytes

    @property
    def internal_address(self) -> int:
        return self.address(INTERNAL)

    @property
    def internal(self) -> np.ndarray:
        """The SHRAM, zeroed when a run first uses it (most programs never do)."""
        if self._internal is None:
            self._internal = np.zeros(self.internal_size, dtype=np.uint8)
        return self._internal

    def zero_internal(self) -> None:
        """Zero the SHRAM, where a run used it (memory kept for the next run)."""
        if self._internal is not None:
            self._internal.fill(0)

    @property
    def lut_base(self) -> int:
        """SHRAM address of LUT slot 0."""
        return self.internal_size - LUT_BYTES

    def region(self, region: int, what: str) -> np.ndarray:
        try:
            return self.regions[region]
        except KeyError:
            raise RegionError(
                f"{what}: region {region} does not exist (this program has "
                f"regions {sorted(self.regions)})"
            ) from None

    def check(self, region: int, lo: int, hi: int, what: str) -> None:
        """Raise unless bytes [lo, hi) lie inside the region."""
        mem = self.region(region, what)
        if lo < 0 or hi > len(mem):
            name = REGION_NAMES.get(region, f"region {region}")
            raise RegionError(
                f"{what}: access to bytes [{lo:#x}, {hi:#x}) of region {region} "
                f"({name}, {len(mem)} bytes) overflows the region"
            )
        self.reach(region, hi)

    def reach(self, region: int, hi: int) -> None:
        """Count bytes up to hi of region in its extent (an access found in bounds)."""
        if hi > self.extent.get(region, 0):
            self.extent[region] = hi

    def check_internal(self, lo: int, hi: int, what: str) -> None:
        """Raise unless SHRAM bytes [lo, hi) exist."""
        if lo < 0 or hi > self.internal_size:
            raise RegionError(
                f"{what}: access to bytes [{lo:#x}, {hi:#x}) of internal memory "
                f"(SHRAM, {self.internal_size} bytes) overflows it"
            )

    def read_bytes(self, region: int, start: int, length: int, what: str) -> np.ndarray:
        self.check(region, start, start + length, what)
        return self.regions[region][start : start + length]

    def write_bytes(self, region: int, start: int, data: np.ndarray, what: str) -> None:
        self.check(region, start, start + len(data), what)
        self.regions[region][start : start + len(data)] = data


def check_lut(finish, memory: Memory, what: str) -> None:
    """Raise unless the lookup table an output stage (outstage.Finish) reads lies in the
    internal memory."""
    lut = finish.lut
    if lut is not None:
        memory.check_internal(lut.offset, lut.offset + lut.nbytes, f"{what} (LUT)")
