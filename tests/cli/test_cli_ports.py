"""`etk ports`: serial ports present, matched to the board targets that expect them."""

from __future__ import annotations

from types import SimpleNamespace

from serial.tools import list_ports

from toolkit.cli import main


def _port(device, vid=None, pid=None, description="n/a"):
    return SimpleNamespace(device=device, vid=vid, pid=pid, description=description)


def test_ports_names_the_board_target_a_port_matches(monkeypatch, capsys):
    monkeypatch.setattr(
        list_ports,
        "comports",
        lambda: [
            _port("/dev/ttyUSB7", 0x0403, 0x6011, "Quad RS232-HS"),
            _port("/dev/ttyS0"),
        ],
    )
    assert main(["ports"]) == 0
    out = capsys.readouterr().out.splitlines()
    # matched by the MPS3's FTDI USB id, whatever its device name
    assert out[0] == "/dev/ttyS0  -  n/a"
    assert out[1] == "/dev/ttyUSB7  0403:6011  Quad RS232-HS  <- mps3-corstone-300"
    assert (
        "  mps3-corstone-300: Arm MPS3 FPGA, Corstone-300 AN552 (Ethos-U55-128) on "
        "/dev/ttyUSB1 (not present, USB 0403:6011, 115200 baud)"
    ) in out


def test_ports_with_none_connected_says_what_to_check(monkeypatch, capsys):
    monkeypatch.setattr(list_ports, "comports", lambda: [])
    assert main(["ports"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        "no serial ports found: connect the board (and check its USB cable carries data)"
    )
