"""etk ports: the serial ports present (pyserial), and which board target expects each."""

from __future__ import annotations

from ..targets import BoardSpec, Target, list_targets


def _expected_by(port, boards: list[tuple[Target, BoardSpec]]) -> list[str]:
    usb_id = f"{port.vid:04x}:{port.pid:04x}" if port.vid is not None else None
    names = []
    for target, spec in boards:
        if spec.port == port.device or (usb_id is not None and usb_id in spec.usb_ids):
            names.append(target.name)
    return names


def _ports(_args) -> int:
    from serial.tools import list_ports

    boards = [(t, t.board_spec) for t in list_targets() if t.board_spec is not None]
    ports = sorted(list_ports.comports(), key=lambda p: p.device)
    if not ports:
        print("no serial ports found: connect the board (and check its USB cable carries data)")
    for port in ports:
        usb = f"{port.vid:04x}:{port.pid:04x}" if port.vid is not None else "-"
        expected = _expected_by(port, boards)
        print(
            f"{port.device}  {usb}  {port.description}"
            + (f"  <- {', '.join(expected)}" if expected else "")
        )
    present = {p.device for p in ports}
    if boards:
        print("\nboard targets:")
    for target, spec in boards:
        where = spec.port or "no port set"
        state = "present" if spec.port in present else "not present"
        ids = f", USB {', '.join(spec.usb_ids)}" if spec.usb_ids else ""
        print(f"  {target.name}: {spec.name} on {where} ({state}{ids}, {spec.baud} baud)")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ports", help="serial ports found, and the board each board target expects"
    )
    parser.set_defaults(func=_ports)
