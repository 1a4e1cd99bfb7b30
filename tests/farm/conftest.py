"""The stand-in labgrid farm (tests/stand_ins/labgrid_farm.py): the real coordinator and exporters on
127.0.0.1, stand-in boards behind RFC 2217; every process ends with the test."""

from __future__ import annotations

import pytest

from .helpers import TAGS

pytest.importorskip("labgrid", reason="the farm tests need labgrid: pip install '.[farm]'")

from labgrid_farm import StandInFarm  # noqa: E402 - helpers put tests/stand_ins on sys.path


@pytest.fixture
def make_farm(tmp_path):
    """make_farm(places, **board) -> a running StandInFarm, ended after the test."""
    farms = []

    def make(places: int = 2, **board) -> StandInFarm:
        farm = StandInFarm(tmp_path / f"farm{len(farms)}", places, TAGS, **board)
        farm.__enter__()
        farms.append(farm)
        return farm

    yield make
    for farm in farms:
        farm.__exit__(None, None, None)
