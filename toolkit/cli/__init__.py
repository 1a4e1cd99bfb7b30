"""The `etk` command: parse, dispatch to a verb module, map errors to exit codes.

Each verb lives in its own module here with `register(subparsers)`, which adds the verb's parser
and sets `func` (args -> exit code). Exit codes: 0 ok, 1 a check failed (regression, mismatch),
2 bad input (one line, no traceback unless --debug), 3 an external tool failed.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from .. import __version__
from ..console_capture import quiet_third_party_warnings, quiet_torch_import
from ..errors import ToolError, UserError

VERB_MODULES = (
    "bench",
    "cache",
    "compile",
    "deploy",
    "diff",
    "doctor",
    "import_weights",
    "log",
    "ports",
    "targets",
)
# verbs that load torch and ExecuTorch (the others start in a fraction of a second)
TORCH_VERBS = frozenset({"bench", "compile", "compare", "deploy", "import-weights"})
# verbs that compile: an unusable ETK_CACHE_DIR is refused before they start
COMPILING_VERBS = frozenset({"bench", "compile", "compare", "deploy"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="etk",
        description="PyTorch models on Arm Ethos-U NPUs: compile, deploy, compare "
        "fused vs unfused activations.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"etk {__version__}")
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if not args.debug:
        quiet_third_party_warnings()
    try:
        _before_the_verb(args)
        return int(args.func(args) or 0)
    except UserError as exc:
        if args.debug:
            raise
        print(f"etk: error: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        if args.debug:
            raise
        print(f"etk: {exc}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # an OSError, but no folder's
        return _output_closed()
    except OSError as exc:
        if args.debug or exc.errno not in _FOLDER_ERRORS:
            raise
        print(f"etk: error: {_folder_error(exc, getattr(args, 'out', None))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("etk: interrupted", file=sys.stderr)
        return 130


def _output_closed() -> int:
    """stdout's reader went away (`etk log --json | head`): say so once; what Python would still
    flush at exit goes nowhere instead of into a second BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    print(
        "etk: error: the output was closed before etk finished writing it (a pipe's reader "
        "ended, as `| head` does): nothing else is wrong",
        file=sys.stderr,
    )
    return 2


def _before_the_verb(args: argparse.Namespace) -> None:
    """What is refused in a second, before a verb imports torch: an unusable cache folder, a
    MODEL that names nothing loadable."""
    if args.verb in COMPILING_VERBS:
        from ..lower.compile_cache import usable_cache_root

        usable_cache_root()
    if args.verb in TORCH_VERBS and isinstance(getattr(args, "model", None), str):
        from ..model_spec import check_model_spec

        check_model_spec(args.model)
    if args.verb == "bench" and not args.scheduler:
        from ..bench.worker_server import start_worker_server

        start_worker_server()  # its imports go on beside this process's
    if args.verb in TORCH_VERBS and not args.debug:
        quiet_torch_import()


# OS errors of the folders etk writes (a full disk, a quota, a read-only or vanished folder):
# the user's to fix, said in one line; what was written before is whole (write_atomic)
_FOLDER_ERRORS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOENT,
    errno.ENOTDIR,
    errno.ENAMETOOLONG,
}


_FULL = {errno.ENOSPC, errno.EDQUOT}


def _folder_error(exc: OSError, out: os.PathLike[str] | str | None) -> str:
    """One line for an OS error; out: the run's output folder (a failed write names no file)."""
    where = os.fspath(exc.filename) if exc.filename else None
    if exc.errno in _FULL:
        if exc.filename2:  # a copy: filename is what was read, filename2 what filled the disk
            where = os.fspath(exc.filename2)
        folder = os.path.dirname(where) if where else os.fspath(out) if out else "."
        where = where or f"into {folder}"
        return f"cannot write {where}: {exc.strerror}; free space in {folder} or choose another folder (-o/--out)"
    return f"cannot use {where or 'a file'}: {exc.strerror}; check the path and its permissions"


if __name__ == "__main__":
    sys.exit(main())
