"""A stand-in flash tool for the board emulator (board_emulator.py). TESTS ONLY.

board_flash.py flash DIR IMAGE PORT   copy IMAGE to DIR/image.bpte ("write it to MRAM");
                                      fails when PORT does not exist, like a real tool
board_flash.py reset DIR              ask the emulated board to restart
board_flash.py fail                   a flash tool that cannot reach the target (exit 1)
board_flash.py hang                   a flash tool that never returns
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

IMAGE = "image.bpte"
RESET = "reset"


def request_reset(folder: Path) -> None:
    tmp = folder / f"{RESET}.tmp"
    tmp.write_text(str(time.monotonic()))
    tmp.replace(folder / RESET)


def main(argv: list[str]) -> int:
    command, *args = argv
    if command == "flash":
        folder, image, port = Path(args[0]), Path(args[1]), args[2]
        if not os.path.exists(port):
            print(f"error: no board on {port}", file=sys.stderr)
            return 2
        tmp = folder / f"{IMAGE}.tmp"
        shutil.copyfile(image, tmp)
        tmp.replace(folder / IMAGE)
        print(f"Writing {image.stat().st_size} bytes to MRAM... done")
        return 0
    if command == "reset":
        request_reset(Path(args[0]))
        print("reset requested")
        return 0
    if command == "fail":
        print(
            "Connecting to target... ERROR: target not responding (is it in maintenance mode?)",
            file=sys.stderr,
        )
        return 1
    if command == "hang":
        print("Connecting to target...", flush=True)
        time.sleep(120)
        return 0
    print(f"unknown command {command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
