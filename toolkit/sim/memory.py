"""Memory regions (BASEP0-7 in hardware): 0 weights, 1 scratch, 2 fast scratch."""

from __future__ import annotations

import numpy as np

from .errors import RegionError

REGION_NAMES = {0: "weights", 1: "scratch", 2: "fast scratch"}


class Memory:
    def __init__(self, regions: dict[int, np.ndarray]):
        self.regions = regions

    def _region(self, region: int, what: str) -> np.ndarray:
        try:
            return self.regions[region]
        except KeyError:
            raise RegionError(f"{what}: region {region} does not exist (this program has "
                              f"regions {sorted(self.regions)})") from None

    def _check(self, mem: np.ndarray, region: int, lo: int, hi: int, what: str) -> None:
        if lo < 0 or hi > len(mem):
            name = REGION_NAMES.get(region, f"region {region}")
            raise RegionError(f"{what}: access to bytes [{lo:#x}, {hi:#x}) of region {region} "
                              f"({name}, {len(mem)} bytes) overflows the region")

    def read_bytes(self, region: int, start: int, length: int, what: str) -> np.ndarray:
        mem = self._region(region, what)
        self._check(mem, region, start, start + length, what)
        return mem[start:start + length]

    def write_bytes(self, region: int, start: int, data: np.ndarray, what: str) -> None:
        mem = self._region(region, what)
        self._check(mem, region, start, start + len(data), what)
        mem[start:start + len(data)] = data

    def gather(self, region: int, addr: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
        """Elements of `dtype` at byte addresses `addr` (any shape)."""
        mem = self._region(region, what)
        size = dtype.itemsize
        if addr.size:
            self._check(mem, region, int(addr.min()), int(addr.max()) + size, what)
        if size == 1:
            return mem[addr].view(dtype)
        idx = addr[..., None] + np.arange(size)
        return np.ascontiguousarray(mem[idx]).view(dtype)[..., 0]

    def scatter(self, region: int, addr: np.ndarray, values: np.ndarray, what: str) -> None:
        mem = self._region(region, what)
        size = values.dtype.itemsize
        if addr.size:
            self._check(mem, region, int(addr.min()), int(addr.max()) + size, what)
        if size == 1:
            mem[addr] = values.view(np.uint8)
        else:
            raw = np.ascontiguousarray(values)[..., None].view(np.uint8)
            mem[addr[..., None] + np.arange(size)] = raw
