"""capture_fds takes what native code writes to fd 1 and 2 and what Python code prints, in the
order written, even where sys.stdout is not fd 1 (as under pytest, or in Jupyter)."""

from __future__ import annotations

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
