"""A board target and suites for the farm tests: the stand-in boards of tests/stand_ins/labgrid_farm.py."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

STAND_INS = Path(__file__).resolve().parents[1] / "stand_ins"
if str(STAND_INS) not in sys.path:
    sys.path.insert(0, str(STAND_INS))

BOARD = "emulated-farm-board"
NPU = "ethos-u55-128"
TAGS = {"board": BOARD, "npu": NPU}


def write_board_target(folder: Path, **board) -> Path:
    """A board target the stand-in farm's places run (their EtkFlasher flashes them)."""
    tool = shlex.join([sys.executable, str(STAND_INS / "board_flash.py")])
    settings = {
        "name": "stand-in farm board",
        "baud": 115200,
        "flash": f"{tool} fail",  # never used: every place brings its EtkFlasher
        "reset": "command",
        "reset_command": f"{tool} fail",
        "test_sets": "all",
        "flash_time_limit_s": 30,
        "banner_time_limit_s": 10,
        "run_time_limit_s": 20,
        "reconnect_time_limit_s": 1,
        "retries": 1,
        **board,
    }
    lines = [
        f'name = "{BOARD}"',
        "[npu]",
        f'default = "{NPU}"',
        f'supported = ["{NPU}"]',
        "[board]",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    path = folder / f"{BOARD}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_farm_suite(path: Path, target: Path, models: list[str], fusion=("on", "off"), vela=1):
    """models x fusion x `vela` option sets on the farm's board, 2 evaluation samples each."""
    text = (
        f'name = "farm"\nmodels = {json.dumps(models)}\ntargets = [{json.dumps(str(target))}]\n'
        f'fusion = {json.dumps(list(fusion))}\nrunners = ["farm"]\n'
        "[settings]\neval_samples = 2\ncalibration_samples = 2\n"
    )
    for k in range(vela if vela > 1 else 0):
        text += f'[[vela]]\nname = "v{k}"\nflags = ["--arena-cache-size={(k + 1) * 1000000}"]\n'
    path.write_text(text)
    return path
