"""Suites for the bench tests: the example zoo suite cut down, and reading results back."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY_MODELS = ["zoo:conv2d_relu", "zoo:linear_relu6"]
TINY_NPUS = ["ethos-u55-128", "ethos-u65-256"]


def write_suite(
    path: Path, models=TINY_MODELS, npus=TINY_NPUS, fusion=("on", "off"), extra: str = ""
) -> Path:
    """The example zoo suite (examples/suites/zoo.toml) cut down to a few models and NPUs."""
    text = (REPO / "examples/suites/zoo.toml").read_text()
    text = text.replace('models = ["zoo:*"]', f"models = {json.dumps(list(models))}")
    text = text.replace(
        'npus = ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]',
        f"npus = {json.dumps(list(npus))}",
    )
    text = text.replace('fusion = ["on", "off"]', f"fusion = {json.dumps(list(fusion))}")
    text = text.replace("eval_samples = 4", "eval_samples = 2")
    path.write_text(text + textwrap.dedent(extra))
    return path


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
