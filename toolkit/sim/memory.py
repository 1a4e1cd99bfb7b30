"""Memory regions (BASEP0-7 in hardware): 0 weights, 1 scratch, 2 fast scratch."""

from __future__ import annotations

import numpy as np

from .errors import RegionError

REGION_NAMES = {0: "weights", 1: "scratch", 2: "fast scratch"}


class Memory:
    def __init__(self, regions: dict[int, np.ndarray]):
        self.regions = regions

    def region(self, region: int, what: str) -> np.ndarray:
        try:
            return self.regions[region]
        except KeyError:
            raise RegionError(f"{what}: region {region} does not exist (this program has "
                              f"regions {sorted(self.regions)})") from None

    def check(self, region: int, lo: int, hi: int, what: str) -> None:
        """Raise unless bytes [lo, hi) lie inside the region."""
        mem = self.region(region, what)
        if lo < 0 or hi > len(mem):
            name = REGION_NAMES.get(region, f"region {region}")
            raise RegionError(f"{what}: access to bytes [{lo:#x}, {hi:#x}) of region {region} "
                              f"({name}, {len(mem)} bytes) overflows the region")

    def read_bytes(self, region: int, start: int, length: int, what: str) -> np.ndarray:
        self.check(region, start, start + length, what)
        return self.regions[region][start:start + length]

    def write_bytes(self, region: int, start: int, data: np.ndarray, what: str) -> None:
        self.check(region, start, start + len(data), what)
        self.regions[region][start:start + len(data)] = data
