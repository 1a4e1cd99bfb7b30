"""The Python API refuses a wrongly typed option with a UserError naming it, before anything runs.

On main `output=5`, `target=123` and `seeds="abc"` failed deep in the pipeline with a TypeError or
AttributeError, and `vela_options="--x"` was read one character at a time ('-', '-', 'x')."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkit
from toolkit.errors import UserError


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda out: toolkit.compile("zoo:conv2d_relu", output=5),
            "output=5 (int): output takes a path (str or pathlib.Path)",
        ),
        (
            lambda out: toolkit.compile("zoo:conv2d_relu", output=out, target=123),
            "target=123 (int): target takes a string",
        ),
        (
            lambda out: toolkit.compare("zoo:conv2d_relu", output=out, seeds="abc"),
            "seeds='abc' (str): seeds takes an integer",
        ),
        (
            lambda out: toolkit.compile("zoo:conv2d_relu", output=out, vela_options="--x"),
            "vela_options='--x' (str): vela_options takes a list of strings, e.g. "
            "['--optimise=Size']",
        ),
        (
            lambda out: toolkit.deploy("zoo:conv2d_relu", output=out, eval_samples=2.5),
            "eval_samples=2.5 (float): eval_samples takes an integer",
        ),
        (
            lambda out: toolkit.deploy("zoo:conv2d_relu", output=out, runner="sim", flash="no"),
            "flash='no' (str): flash takes True or False",
        ),
        (
            lambda out: toolkit.compile("zoo:conv2d_relu", output=out, seed=True),
            "seed=True (bool): seed takes an integer",
        ),
    ],
)
def test_a_wrongly_typed_option_is_a_user_error(tmp_path, call, message):
    out = tmp_path / "out"
    with pytest.raises(UserError) as refused:
        call(out)
    assert str(refused.value) == message
    assert not out.exists()  # refused before anything was made


def test_a_path_object_is_a_path(tmp_path):
    with pytest.raises(UserError, match="--eval-samples must be at least 1, got 0"):
        toolkit.compile("zoo:conv2d_relu", output=Path(tmp_path) / "o", eval_samples=0)
