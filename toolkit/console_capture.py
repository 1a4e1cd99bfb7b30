"""Capture what native code (Vela's C++ core, the TOSA reference model) prints to fd 1 and 2,
and what Python code prints while sys.stdout or sys.stderr is not fd 1 or 2 (pytest, Jupyter)."""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import sys
import tempfile
import warnings


class CapturedText:
    text: str = ""


@contextlib.contextmanager
def capture_fds(fds: tuple[int, ...] = (1, 2)):
    """Redirect the process-level file descriptors, and sys.stdout / sys.stderr with them, into
    a buffer; yields a CapturedText."""
    result = CapturedText()
    streams = [name for fd, name in ((1, "stdout"), (2, "stderr")) if fd in fds]
    for name in streams:
        getattr(sys, name).flush()
    with tempfile.TemporaryFile() as sink:
        saved = {fd: os.dup(fd) for fd in fds}
        saved_streams = {name: getattr(sys, name) for name in streams}
        # the same file position as the descriptors: Python's and native writes stay in order
        writer = io.TextIOWrapper(
            io.FileIO(sink.fileno(), "w", closefd=False), errors="replace", write_through=True
        )
        try:
            for fd in fds:
                os.dup2(sink.fileno(), fd)
            for name in streams:
                setattr(sys, name, writer)
            yield result
        finally:
            writer.flush()
            for name, stream in saved_streams.items():
                setattr(sys, name, stream)
            if saved_streams:  # a handler takes sys.stderr by default: both share the writer
                _repoint_log_handlers(
                    writer, saved_streams.get("stderr") or saved_streams["stdout"]
                )
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            result.text = sink.read().decode(errors="replace")


def _repoint_log_handlers(captured, stream) -> None:
    """A logging.StreamHandler made during the capture (torch and ExecuTorch make them at import)
    took sys.stderr, the capture's writer: after it, that writer's descriptor is closed, or
    another file's. Such handlers write to the restored stream instead."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):  # a PlaceHolder has none
            if isinstance(handler, logging.StreamHandler) and handler.stream is captured:
                handler.setStream(stream)


TORCH_SIDE = "toolkit.pipeline"  # imports torch; a compile imports torchao and ExecuTorch later
COMPILER_SIDE = "toolkit.lower.compiler"  # the quantizer and ExecuTorch's lowering
PYTREE_LEAFSPEC_WARNING = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


def quiet_torch_import(module: str = TORCH_SIDE) -> None:
    """Import module with fd 2 captured: torchao's import-time chatter ("Failed to load
    ..._C_mxfp8...so" for its optional CUDA kernels, torch's pytree Enum warnings) is not for our
    users. Later imports of torch, torchao and ExecuTorch are silent; if the import fails, what it
    printed is shown after all. Also hides torch's pytree FutureWarning about its own use of
    LeafSpec (from copyreg.py, on every compile)."""
    warnings.filterwarnings("ignore", message=PYTREE_LEAFSPEC_WARNING, category=FutureWarning)
    captured = CapturedText()
    try:
        with capture_fds((2,)) as captured:
            importlib.import_module(module)
    except BaseException:
        sys.stderr.write(captured.text)
        raise


def quiet_third_party_warnings() -> None:
    """Warnings from torch, torchao, ExecuTorch and the like (pages of FutureWarnings on every
    run) are not for our users; our own still show."""
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=r"toolkit(\.|$)")
