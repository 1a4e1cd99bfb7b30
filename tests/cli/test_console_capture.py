"""capture_fds takes what native code writes to fd 1 and 2 and what Python code prints, in the
order written, even where sys.stdout is not fd 1 (as under pytest, or in Jupyter)."""

from __future__ import annotations

import logging
import os
import sys

from toolkit.console_capture import capture_fds


def test_python_and_native_writes_are_captured_in_order():
    stdout, stderr = sys.stdout, sys.stderr
    with capture_fds() as log:
        print("python stdout")
        os.write(1, b"fd 1\n")
        print("python stderr", file=sys.stderr)
        os.write(2, b"fd 2\n")
    assert log.text == "python stdout\nfd 1\npython stderr\nfd 2\n"
    assert (sys.stdout, sys.stderr) == (stdout, stderr)


def test_only_the_named_descriptors_are_taken(capsys):
    with capture_fds((2,)) as log:
        print("to stdout")
        print("to stderr", file=sys.stderr)
    assert log.text == "to stderr\n"
    assert capsys.readouterr().out == "to stdout\n"


def test_a_log_handler_made_while_captured_writes_to_the_restored_stream_after(capsys):
    """torch and ExecuTorch add StreamHandlers (on sys.stderr) at import, which etk captures:
    they wrote to the capture's closed descriptor ("--- Logging error --- ... Bad file
    descriptor", or into whatever file took its number next)."""
    logger = logging.getLogger("etk-test-captured-handler")
    logger.propagate = False
    with capture_fds((2,)) as log:
        handler = logging.StreamHandler()  # takes sys.stderr: the capture's writer
        logger.addHandler(handler)
        logger.warning("during")
    try:
        logger.warning("after")
        assert handler.stream is sys.stderr
        assert log.text == "during\n"
        assert capsys.readouterr().err == "after\n"
    finally:
        logger.removeHandler(handler)


def test_a_log_handler_made_while_both_are_captured_writes_to_stderr_after(capsys):
    logger = logging.getLogger("etk-test-captured-handler-both")
    logger.propagate = False
    with capture_fds():
        handler = logging.StreamHandler()
        logger.addHandler(handler)
    try:
        logger.warning("after")
        assert capsys.readouterr() == ("", "after\n")
    finally:
        logger.removeHandler(handler)
