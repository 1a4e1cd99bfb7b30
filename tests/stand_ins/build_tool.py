"""Stand-ins for the board targets' build and flash tools (west, build_executor_runner.sh,
arm-none-eabi-objcopy, app-gen-toc, app-write-mram). TESTS ONLY.

    build_tool.py NAME ARG...   append {"tool": NAME, "argv": [ARG...]} as a JSON line to
                                $ETK_STANDIN_LOG and write the file the real tool would write:
      west build ... -d DIR ...           DIR/zephyr/zephyr.elf
      build_executor_runner.sh --output=DIR ...   DIR/arm_executor_runner
      arm-none-eabi-objcopy ... IN OUT    OUT (a copy of IN)
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path


def main(name: str, argv: list[str]) -> int:
    with open(os.environ["ETK_STANDIN_LOG"], "a") as log:
        log.write(json.dumps({"tool": name, "argv": argv}) + "\n")
    if name == "west":
        elf = Path(argv[argv.index("-d") + 1]) / "zephyr" / "zephyr.elf"
        elf.parent.mkdir(parents=True, exist_ok=True)
        elf.write_bytes(b"ELF")
    elif name == "build_executor_runner.sh":
        output = Path(next(a for a in argv if a.startswith("--output="))[len("--output=") :])
        output.mkdir(parents=True, exist_ok=True)
        (output / "arm_executor_runner").write_bytes(b"ELF")
    elif name == "arm-none-eabi-objcopy":
        shutil.copyfile(argv[-2], argv[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
