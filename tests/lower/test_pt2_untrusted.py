"""A .pt2 from someone else: entries that unpickle are refused before anything loads."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch

from toolkit.errors import UserError
from toolkit.models.loader import load_model


class _Marker:
    """Unpickling this creates the file it names (what an attacker's payload would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _saved(tmp_path: Path) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    path = tmp_path / "good.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(1, 4),)), path)
    return path


def _rewrite(source: Path, target: Path, edit) -> Path:
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, edit(info.filename, src.read(info.filename)))
    return target


def _pickled_weight(tmp_path: Path, marker: Path) -> Path:
    """weight_0 marked use_pickle, holding a pickle that creates `marker` when loaded."""
    evil = tmp_path / "evil.bin"
    torch.save(_Marker(str(marker)), evil)

    def edit(name, data):
        if name.endswith("_weights_config.json"):
            config = json.loads(data)
            first = next(iter(config["config"].values()))
            first["use_pickle"] = True
            return json.dumps(config).encode()
        if name.endswith("data/weights/weight_0"):
            return evil.read_bytes()
        return data

    return _rewrite(_saved(tmp_path), tmp_path / "evil.pt2", edit)


def test_the_crafted_file_runs_code_in_torch_export_load(tmp_path):
    marker = tmp_path / "MARKER"
    path = _pickled_weight(tmp_path, marker)
    try:
        torch.export.load(str(path))
    except Exception:  # noqa: BLE001 - only the side effect matters here
        pass
    assert marker.exists()  # so the refusal below is what keeps it from running


def test_pickled_entry_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "MARKER"
    path = _pickled_weight(tmp_path, marker)
    with pytest.raises(
        UserError,
        match=r"holds a pickled entry '0.weight' \(good/data/weights/"
        r"model_weights_config.json\), which would run code",
    ):
        load_model(str(path))
    assert not marker.exists()


def test_pickled_sample_inputs_are_loaded_weights_only(tmp_path):
    """Sample inputs are a torch.save pickle that torch retries with weights_only=False."""
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.bin"
    torch.save(_Marker(str(marker)), evil)
    path = _rewrite(
        _saved(tmp_path),
        tmp_path / "evil.pt2",
        lambda name, data: evil.read_bytes() if name.endswith("sample_inputs/model.pt") else data,
    )
    with pytest.raises(UserError, match="is not a loadable torch.export .pt2 file"):
        load_model(str(path))
    assert not marker.exists()


def test_a_plain_pt2_loads(tmp_path):
    model = load_model(str(_saved(tmp_path)))
    assert [tuple(x.shape) for x in model.example_inputs] == [(1, 4)]
