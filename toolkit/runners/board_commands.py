"""Run a board's build, flash and reset command templates: filled in, time-limited, logged."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ToolError, UserError

SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


def _script_index(words: list[str]) -> int | None:
    """The index of the script in `sh -c 'SCRIPT' ...` (also `-ec`, `-xc`, ...), else None."""
    if not words or os.path.basename(words[0]) not in SHELLS:
        return None
    for index, word in enumerate(words[1:], start=1):
        if not word.startswith("-"):
            return None
        if "c" in word[1:] and not word.startswith("--"):
            return index + 1 if index + 1 < len(words) else None
    return None


def render(step: str, values: Mapping[str, str]) -> list[str]:
    """One template step -> argv: split like a shell line, then each argument filled in.

    In a shell script (`sh -c '...'`) a value becomes shell text, so it is filled in quoted for
    the shell: a placeholder there stands bare (`cp x {elf}`, `"$(dirname {elf})/west"`), never
    inside quotes of its own.
    """
    try:
        words = shlex.split(step)
    except ValueError as exc:
        raise UserError(f"board command {step!r} cannot be split: {exc}") from None
    script = _script_index(words)
    quoted = {key: shlex.quote(str(value)) for key, value in values.items()}
    # $VARS and ~ expand in the template only, never in the values filled in.
    return [
        os.path.expanduser(os.path.expandvars(w)).format_map(quoted if i == script else values)
        for i, w in enumerate(words)
    ]


def _tail(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def run_steps(
    what: str,
    steps: Sequence[str],
    values: Mapping[str, str],
    time_limit_s: float,
    log_path: Path,
    cwd: Path,
) -> None:
    """Run each step in turn; ToolError naming the step when one is missing, fails or hangs.

    time_limit_s covers all the steps together. Output of every step goes to log_path.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + time_limit_s
    with open(log_path, "w") as log:
        for step in steps:
            argv = render(step, values)
            log.write(f"$ {shlex.join(argv)}\n")
            log.flush()
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise ToolError(
                    f"{what} command not found: {argv[0]} (from the step {step!r}); "
                    "install it or fix the [board] table of the target file"
                ) from None
            except OSError as exc:
                raise ToolError(f"cannot start the {what} command {argv[0]}: {exc}") from None
            try:
                out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
                log.write(out)
                raise ToolError(
                    f"{what} did not finish within {time_limit_s:g} s and was "
                    f"killed: {shlex.join(argv)}\nlog: {log_path}\n{_tail(out)}"
                ) from None
            log.write(out)
            log.flush()
            if proc.returncode != 0:
                raise ToolError(
                    f"{what} failed with exit code {proc.returncode}: "
                    f"{shlex.join(argv)}\nlog: {log_path}\n{_tail(out)}"
                )
