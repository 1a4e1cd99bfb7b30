"""A Vela ini is parsed once per version of the file: resolving the NPU (npu.py) and checking the
Vela options (lower/vela_options.py) read the same parse."""

from __future__ import annotations

import configparser
import os

import pytest

from toolkit.errors import UserError
from toolkit.lower.vela_options import check_vela_options
from toolkit.npu import npu_config, vendor_npu_config

INI = """[System_Config.Board_A]
core_clock=400e6
axi0_port=Sram
axi1_port=OffChipFlash

[Memory_Mode.Shared_Sram]
const_mem_area=Axi1
arena_mem_area=Axi0
cache_mem_area=Axi0
"""


def test_resolving_and_checking_parse_the_ini_once(tmp_path, monkeypatch):
    ini = tmp_path / "board.ini"
    ini.write_text(INI)
    reads = []
    real = configparser.ConfigParser.read
    monkeypatch.setattr(
        configparser.ConfigParser,
        "read",
        lambda self, path, *a: reads.append(path) or real(self, path, *a),
    )
    npu = vendor_npu_config(npu_config("ethos-u55-128", "Board_A", "Shared_Sram"), ini, "test")
    check_vela_options(npu, ())
    check_vela_options(npu, ())
    assert reads == [str(ini.resolve())]
    ini.write_text(INI.replace("Board_A", "Board_B"))  # a new version of the file: read again
    os.utime(ini, ns=(1, 1))
    with pytest.raises(
        UserError, match="has no System_Config 'Board_A': pass --system-config with one of Board_B"
    ):
        vendor_npu_config(npu_config("ethos-u55-128", "Board_A", "Shared_Sram"), ini, "test")
    assert len(reads) == 2
