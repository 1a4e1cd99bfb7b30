"""Board targets, runner choice and `etk ports`, without a board."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from toolkit.cli import ports
from toolkit.errors import UserError
from toolkit.runners.board_commands import render
from toolkit.runners.select import select_runner
from toolkit.targets import load_target


def test_shipped_board_targets():
    hp, he, mps3 = (load_target(n) for n in ("alif-e7-hp", "alif-e7-he", "mps3-corstone-300"))
    assert (hp.npu().accelerator, he.npu().accelerator, mps3.npu().accelerator) == (
        "ethos-u55-256",
        "ethos-u55-128",
        "ethos-u55-128",
    )
    assert {t.npu().memory_mode for t in (hp, he, mps3)} == {"Shared_Sram"}
    (build,) = [
        render(s, {"pte": "/o/p.pte", "bpte": "B", "elf": "/o/r.elf", "port": "X"})
        for s in hp.board_spec.build_command
    ]
    # ExecuTorch's Zephyr hello-executorch sample with mv2-ethosu's Alif E8 board settings
    assert (
        'west build -p always -d "$(dirname /o/r.elf)/west" -b '
        'ensemble_e8_dk/ae822fa0e5597ls0/rtss_hp "$EXECUTORCH_ROOT/zephyr/samples/'
        'hello-executorch" -- -DET_PTE_FILE_PATH=/o/p.pte'
    ) in build[-1]
    assert (hp.board_spec.inputs, he.board_spec.inputs, mps3.board_spec.inputs) == (
        "ones",
        "ones",
        "bundled",
    )
    assert (mps3.board_spec.reset, mps3.board_spec.usb_ids) == ("command", ("0403:6011",))
    assert load_target("corstone-300").board_spec is None


@pytest.mark.parametrize(
    "board, message",
    [
        (
            'flash = "tool {image}"',
            r"key 'board.flash' uses \{image\}; the placeholders are "
            r"\{pte\}, \{bpte\}, \{elf\}, \{port\}",
        ),
        (
            'flash = "tool"\nreset = "button"',
            r"key 'board.reset' is str 'button', expected one of "
            r"flash, command, manual",
        ),
        ('flash = "tool"\nreset = "command"', r"key 'board.reset_command' missing"),
        ('flash = "tool"\nusb_ids = ["0403-6011"]', r"key 'board.usb_ids' is str '0403-6011'"),
        ("flash = 3", r"key 'board.flash' is int 3, expected a command template or a list of them"),
    ],
)
def test_board_table_errors_name_the_key(tmp_path, board, message):
    path = tmp_path / "b.toml"
    path.write_text(
        'name = "b"\n[npu]\ndefault = "ethos-u55-128"\nsupported = ["ethos-u55-128"]'
        f'\n[board]\nname = "B"\n{board}\n'
    )
    with pytest.raises(UserError, match=message):
        load_target(str(path))


def test_serial_runs_only_when_asked_for(tmp_path):
    target = load_target("alif-e7-hp")
    runner, _ = select_runner("auto", target, target.npu())
    assert runner.name != "serial"
    with pytest.raises(
        UserError,
        match=f"runner 'serial' cannot run here: serial port {tmp_path}/ttyACM7 not found",
    ):
        select_runner("serial", target, target.npu(), port=str(tmp_path / "ttyACM7"))
    with pytest.raises(UserError, match="target 'corstone-300' has no \\[board\\] table"):
        select_runner("serial", load_target("corstone-300"), load_target("corstone-300").npu())


def test_ports_lists_ports_with_the_board_expected(monkeypatch, capsys):
    from serial.tools import list_ports

    found = [
        SimpleNamespace(device="/dev/ttyUSB1", vid=0x0403, pid=0x6011, description="Quad RS232"),
        SimpleNamespace(device="/dev/ttyS0", vid=None, pid=None, description="n/a"),
    ]
    monkeypatch.setattr(list_ports, "comports", lambda: found)
    assert ports._ports(None) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "/dev/ttyS0  -  n/a"
    assert out[1] == "/dev/ttyUSB1  0403:6011  Quad RS232  <- mps3-corstone-300"
    assert (
        "  mps3-corstone-300: Arm MPS3 FPGA, Corstone-300 AN552 (Ethos-U55-128) on "
        "/dev/ttyUSB1 (present, USB 0403:6011, 115200 baud)"
    ) in out


def test_a_board_that_runs_all_ones_inputs_refuses_other_inputs(tmp_path):
    import numpy as np

    from toolkit.artifacts import Program, TensorSpec
    from toolkit.runners.serial import SerialRunner

    target = load_target("alif-e7-hp")
    program = Program(
        "fused",
        "m",
        target.npu(),
        tmp_path,
        tmp_path / "m.pte",
        (),
        (),
        (),
        (TensorSpec((1, 4), "float32"),),
        (TensorSpec((1, 2), "float32"),),
        (None,),
        (None,),
    )
    with pytest.raises(UserError) as err:
        SerialRunner(port=str(tmp_path / "tty")).run(
            program, [np.zeros((1, 4), np.float32)], target
        )
    assert str(err.value).startswith("Alif Ensemble E8 DevKit, HP core (Ethos-U55-256): the image ")
    assert 'runs the model on all-ones inputs (board.inputs = "ones")' in str(err.value)


def test_all_ones_inputs_follow_the_firmwares_fill():
    import numpy as np
    import torch

    from toolkit.artifacts import LoadedModel
    from toolkit.evaluation.evaluate import ones_inputs

    model = LoadedModel(
        "m", "m", None, (torch.zeros(1, 3, 4, 4), torch.zeros(1, 2, dtype=torch.int8))
    )
    (sample,) = ones_inputs(model)
    assert [(a.dtype, a.shape, a.tolist() == np.ones_like(a).tolist()) for a in sample] == [
        (np.float32, (1, 3, 4, 4), True),
        (np.int8, (1, 2), True),
    ]
    model = LoadedModel("m", "m", None, (torch.zeros(1, 3), torch.zeros(1, 2, dtype=torch.int64)))
    with pytest.raises(
        UserError,
        match=r"^m: the firmware fills only float32, int32 and int8 "
        r"inputs with ones and leaves input 1 \(torch.int64\) "
        r"unset, so its outputs cannot be checked: ",
    ):
        ones_inputs(model)
