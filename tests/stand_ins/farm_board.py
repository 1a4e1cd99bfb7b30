"""One stand-in board of a labgrid farm, as its own process. TESTS ONLY.

python farm_board.py ROOT [--test-sets all|first] [--boot-s S] [--inference-s S]

Runs a board emulator (engine "expected": it prints the bundle's expected outputs, needing no
compiled Program) behind a pty, and an RFC 2217 server for that pty; prints `PORT n` once the
server listens, and runs until stdin closes or it is killed. Flash it with
`board_flash.py flash ROOT/flash IMAGE ROOT/flash` and start it with `board_flash.py reset
ROOT/flash`. Its cycle figures are invented (board_emulator.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from board_emulator import BoardEmulator  # noqa: E402

# what reading a flashed bundle imports (torch, ExecuTorch's devtools), before the board says
# it is up: a board answers its first reset in milliseconds, not after a 10 s import
from executorch.devtools.bundled_program.serialize import (  # noqa: E402, F401
    deserialize_from_flatbuffer_to_bundled_program,
)
from executorch.exir.tensor import get_scalar_type  # noqa: E402, F401
from rfc2217_bridge import Rfc2217Bridge  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--test-sets", default="all", choices=("all", "first"))
    parser.add_argument("--boot-s", type=float, default=0.0)
    parser.add_argument("--inference-s", type=float, default=0.0)
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    with (
        BoardEmulator(
            args.root,
            [],
            engine="expected",
            test_sets=args.test_sets,
            boot_s=args.boot_s,
            inference_s=args.inference_s,
        ) as board,
        Rfc2217Bridge(str(board.port)) as bridge,
    ):
        print(f"PORT {bridge.port}", flush=True)
        sys.stdin.read()  # until the test closes our stdin (or kills us)
    return 0


if __name__ == "__main__":
    sys.exit(main())
