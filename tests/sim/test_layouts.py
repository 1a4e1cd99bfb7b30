"""Feature-map tiles (layouts._tiles): BASE0-3 and the tile sizes split a map into up to four
tiles, each element in exactly one, with the base Vela's get_address gives it."""

from __future__ import annotations

import itertools

import pytest

from toolkit.sim.commands import Command
from toolkit.sim.errors import UnsupportedError
from toolkit.sim.families.ethos_u55.fields import ofm_map
from toolkit.sim.layouts import _tiles
from toolkit.sim.registers import Registers

BASES = (100, 200, 300, 400)


def _tile_of(y: int, x: int, height0: int, height1: int, width0: int) -> int:
    # Vela's register_command_stream_util.get_address: tile 1/3 right of width0, tile 2/3
    # below height0 (left) or height1 (right)
    if x >= width0:
        return 3 if y >= height1 else 1
    return 2 if y >= height0 else 0


def test_tiles_cover_each_element_once_with_its_tile_s_base():
    for height0, height1, width0, h, w in itertools.product(
        (1, 2, 5), (1, 3, 5), (1, 4, 6), (1, 3, 5), (1, 4, 6)
    ):
        seen = {}
        for ys, xs, base in _tiles(BASES, height0, height1, width0, h, w):
            for y, x in itertools.product(range(ys.start, ys.stop), range(xs.start, xs.stop)):
                assert (y, x) not in seen
                seen[y, x] = base
        assert seen == {
            (y, x): BASES[_tile_of(y, x, height0, height1, width0)]
            for y, x in itertools.product(range(h), range(w))
        }, (height0, height1, width0, h, w)


def test_a_map_inside_tile_0_is_one_tile():
    assert _tiles(BASES, 8, 2, 8, 8, 8) == [(slice(0, 8), slice(0, 8), 100)]


def test_a_bad_precision_is_unsupported_with_or_without_its_command():
    """Registers read back from a record (simulator.op_outputs) carry no command: the error is
    still an UnsupportedError (it was an AttributeError on the missing command)."""
    values = {"OFM_HEIGHT_M1": 0, "OFM_WIDTH_M1": 0, "OFM_DEPTH_M1": 0, "OFM_PRECISION": 3 << 1}
    with pytest.raises(UnsupportedError, match=r"^OFM_PRECISION precision code 3$"):
        ofm_map(Registers(values))
    with pytest.raises(UnsupportedError, match="code 3 in NPU_OP_CONV .* offset 0x10"):
        ofm_map(Registers(values, Command(0x10, "NPU_OP_CONV", 0)))
