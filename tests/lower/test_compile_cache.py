"""ETK_CACHE_DIR: a program compiled by one process is copied, not compiled, by the next (and the
entry touched); a damaged entry is compiled again and replaced; one process at a time holds a key."""

from __future__ import annotations

import os
import re
import threading

import pytest

import toolkit.lower.build_variant as build_module
import toolkit.lower.compile_cache as compile_cache
import toolkit.lower.compiler as compiler
from toolkit.lower.build_variant import cache_key, compile_variant
from toolkit.lower.compile_cache import CACHE_DIR_ENV, held_entry
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.targets import load_target


def _refuse(*args, **kwargs):
    raise AssertionError("compiled although the shared cache holds the program")


def test_a_program_in_the_shared_cache_is_copied_and_a_damaged_entry_replaced(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    model = load_model("zoo:conv2d_relu")
    calibration = random_calibration(model.example_inputs, 4, 7)
    npu = load_target("corstone-300").npu()
    monkeypatch.setattr(build_module, "_CACHE", {})
    first = compile_variant(model, calibration, "fused", npu, tmp_path / "a")
    assert "lower" in first.timings
    key = cache_key(model, calibration, "fused", npu, (), DEFAULT_REWRITES)
    entry = tmp_path / "cache" / key
    assert (entry / "delegate0.bin").read_bytes() == first.delegates[0].payload

    os.utime(entry, (1, 1))  # long unused
    monkeypatch.setattr(build_module, "_CACHE", {})  # as in another process
    with monkeypatch.context() as patch:
        patch.setattr(compiler, "quantize", _refuse)
        second = compile_variant(model, calibration, "fused", npu, tmp_path / "b")
    assert second.timings == {} and second.out_dir == tmp_path / "b" / "fused"
    assert entry.stat().st_mtime > 1  # the hit made it the most recently used
    assert [(d.payload, d.estimate, d.command_ops) for d in second.delegates] == [
        (d.payload, d.estimate, d.command_ops) for d in first.delegates
    ]

    damaged = bytearray(first.delegates[0].payload)
    damaged[100] ^= 0xFF
    (entry / "delegate0.bin").write_bytes(bytes(damaged))
    monkeypatch.setattr(build_module, "_CACHE", {})
    third = compile_variant(model, calibration, "fused", npu, tmp_path / "c")
    assert "lower" in third.timings  # compiled: the entry failed its checksum
    assert third.delegates[0].payload == first.delegates[0].payload
    assert (entry / "delegate0.bin").read_bytes() == first.delegates[0].payload  # replaced


def test_without_the_variable_nothing_is_shared(monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    with held_entry("0123") as entry:
        assert entry is None


def test_one_holder_per_key_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    acquired = threading.Event()

    def second_holder():
        with held_entry("k1"):
            acquired.set()

    with held_entry("k1") as entry:
        assert entry == tmp_path / "k1"
        waiting = threading.Thread(target=second_holder)
        waiting.start()
        assert not acquired.wait(0.5)  # blocked while the first holds the key
        with held_entry("k2") as other:  # another key is independent
            assert other == tmp_path / "k2"
    assert acquired.wait(5)
    waiting.join()


def test_a_program_the_cache_cannot_take_is_kept_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(build_module, "_CACHE", {})
    monkeypatch.setattr(build_module, "cache_key", lambda *args: "k1")
    built = object()
    monkeypatch.setattr(build_module, "_build", lambda *args: built)
    monkeypatch.setattr(compile_cache, "copy_stored_program", lambda source, target: False)
    assert compile_variant(None, None, "fused", None, tmp_path / "out") is built
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"etk: note: the compiled program was not kept in the compile cache: copying the "
        rf"compiled program into {tmp_path}/cache/\.k1\.partial-\w+ failed\n",
        err,
    ), err
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k1.lock"]  # no partial


def test_publishing_where_no_folder_can_be_made_fails_naming_why(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(compile_cache.PublishFailed, match=r"^Not a directory$"):
        compile_cache.publish(tmp_path, blocker / "k1")


def test_the_key_names_the_hosts_float_kernels(monkeypatch):
    """Calibration's float rounding depends on the kernels torch picks for this CPU, so a program
    compiled on an AVX2 host is not served to an AVX-512 one from a shared cache."""
    from toolkit.versions import tool_versions

    model = load_model("zoo:conv2d_relu")
    calibration = random_calibration(model.example_inputs, 4, 7)
    npu = load_target("corstone-300").npu()
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"):
        monkeypatch.delenv(name, raising=False)  # torch read ATEN_CPU_CAPABILITY at its import
    here = cache_key(model, calibration, "fused", npu, (), DEFAULT_REWRITES)
    kernels = tool_versions()["host_float_kernels"]
    assert re.fullmatch(r"\S+ (DEFAULT|VSX|Z VECTOR|NO AVX|AVX2|AVX512|SVE\d+)( \S+=\S+)?", kernels)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert tool_versions()["host_float_kernels"] == f"{kernels} ONEDNN_MAX_CPU_ISA=AVX2"
    assert cache_key(model, calibration, "fused", npu, (), DEFAULT_REWRITES) != here
