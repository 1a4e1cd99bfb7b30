"""The exact FVP command lines for each target and NPU configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.errors import UserError
from toolkit.runners.fvp import fvp_command, semihosting_cmd_line
from toolkit.targets import data_dir, load_target, load_target_file

RUN_DIR = Path("/runs/ds_cnn/fvp-fused")
ELF = Path("/opt/et/arm_executor_runner")
CS300_CFG = str(data_dir("fvp_configs") / "corstone-300.txt")
CS320_CFG = str(data_dir("fvp_configs") / "corstone-320.txt")


def _cs300(binary: str, macs: int) -> list[str]:
    return [
        binary,
        "-f",
        CS300_CFG,
        "-C",
        f"ethosu.num_macs={macs}",
        "-C",
        "cpu0.semihosting-enable=1",
        "-C",
        "cpu0.semihosting-stack_base=0",
        "-C",
        "cpu0.semihosting-heap_limit=0",
        "-C",
        "cpu0.semihosting-cwd=/runs/ds_cnn/fvp-fused",
        "-C",
        "cpu0.semihosting-cmd_line='executor_runner -m program.pte -o out -i i0.bin'",
        "-a",
        "/opt/et/arm_executor_runner",
        "--timelimit",
        "600",
    ]


CS320_U85_256 = [
    "FVP_Corstone_SSE-320",
    "-f",
    CS320_CFG,
    "-C",
    "mps4_board.subsystem.ethosu.num_macs=256",
    "-C",
    "mps4_board.subsystem.cpu0.semihosting-enable=1",
    "-C",
    "mps4_board.subsystem.cpu0.semihosting-stack_base=0",
    "-C",
    "mps4_board.subsystem.cpu0.semihosting-heap_limit=0",
    "-C",
    "mps4_board.subsystem.cpu0.semihosting-cwd=/runs/ds_cnn/fvp-fused",
    "-C",
    "mps4_board.subsystem.cpu0.semihosting-cmd_line='executor_runner -m program.pte "
    "-o out -i i0.bin'",
    "-a",
    "/opt/et/arm_executor_runner",
    "--timelimit",
    "600",
]


@pytest.mark.parametrize(
    "target_name, accelerator, expected",
    [
        ("corstone-300", "ethos-u55-128", _cs300("FVP_Corstone_SSE-300_Ethos-U55", 128)),
        ("corstone-300", "ethos-u55-256", _cs300("FVP_Corstone_SSE-300_Ethos-U55", 256)),
        ("corstone-300", "ethos-u65-256", _cs300("FVP_Corstone_SSE-300_Ethos-U65", 256)),
        ("corstone-320", "ethos-u85-256", CS320_U85_256),
    ],
)
def test_exact_command_lines(target_name, accelerator, expected):
    target = load_target(target_name)
    assert fvp_command(target, target.npu(accelerator), RUN_DIR, ELF, 1) == expected


def test_board_parameters_come_from_the_config_files():
    assert Path(CS300_CFG).read_text().splitlines()[2:] == [
        "mps3_board.visualisation.disable-visualisation=1",
        "mps3_board.telnetterminal0.start_telnet=0",
        "mps3_board.uart0.out_file=-",
        "mps3_board.uart0.shutdown_on_eot=1",
    ]
    assert Path(CS320_CFG).read_text().splitlines()[2:] == [
        "mps4_board.visualisation.disable-visualisation=1",
        "vis_hdlcd.disable_visualisation=1",
        "mps4_board.telnetterminal0.start_telnet=0",
        "mps4_board.uart0.out_file=-",
        "mps4_board.uart0.unbuffered_output=1",
        "mps4_board.uart0.shutdown_on_eot=1",
    ]


def test_inputs_and_time_limit():
    target = load_target("corstone-300")
    cmd = fvp_command(target, target.npu("ethos-u55-128"), RUN_DIR, ELF, 3, time_limit_s=30)
    assert cmd[-2:] == ["--timelimit", "30"]
    assert (
        "cpu0.semihosting-cmd_line='executor_runner -m program.pte -o out "
        "-i i0.bin -i i1.bin -i i2.bin'"
    ) in cmd


def test_semihosting_command_line_stays_within_255_characters():
    assert len(semihosting_cmd_line(20)) == 247
    with pytest.raises(UserError, match="21 inputs needs a 258-character"):
        semihosting_cmd_line(21)
    with pytest.raises(UserError, match="at least one model input"):
        semihosting_cmd_line(0)


def _target_with(tmp_path: Path, fvp_extra: str) -> Path:
    source = load_target("corstone-300").source.read_text()
    path = tmp_path / "custom.toml"
    path.write_text(source.replace("[fvp.binaries]", fvp_extra + "\n[fvp.binaries]"))
    return path


def test_target_parameters_are_passed_and_fast_mode_is_refused(tmp_path):
    target = load_target_file(
        _target_with(
            tmp_path, '[fvp.parameters]\n"mps3_board.uart0.baud" = 115200\n"cpu0.FPU" = true\n'
        )
    )
    cmd = fvp_command(target, target.npu("ethos-u55-64"), RUN_DIR, ELF, 1)
    assert cmd[3:9] == [
        "-C",
        "ethosu.num_macs=64",
        "-C",
        "mps3_board.uart0.baud=115200",
        "-C",
        "cpu0.FPU=1",
    ]
    assert not any("fast" in arg or "extra_args" in arg for arg in cmd)

    fast = load_target_file(
        _target_with(tmp_path, '[fvp.parameters]\n"ethosu.extra_args" = "--fast"\n')
    )
    with pytest.raises(UserError, match="extra_args=--fast' makes FVP cycle counts meaningless"):
        fvp_command(fast, fast.npu("ethos-u55-128"), RUN_DIR, ELF, 1)


def test_fast_mode_in_the_parameter_file_is_refused(tmp_path):
    config = tmp_path / "fast.txt"
    config.write_text(Path(CS300_CFG).read_text() + "ethosu.extra_args=--fast\n")
    target = load_target_file(_target_with(tmp_path, ""))
    source = target.source.read_text().replace(
        'config_file = "corstone-300.txt"', f'config_file = "{config}"'
    )
    target.source.write_text(source)
    target = load_target_file(target.source)
    with pytest.raises(UserError, match="meaningless"):
        fvp_command(target, target.npu("ethos-u55-128"), RUN_DIR, ELF, 1)
