"""A .pte whose Vela blocks ExecuTorch 1.5.1 stored as named data (pytorch/executorch#21893):
built with ExecuTorch's own API, read back for the simulator, op counts and `etk diff`.

The same network is lowered twice with the same seed: inline (the usual .pte) and with
EthosUCompileSpec(external_block_placements=...) (model.pte holding keys + vela.ptd holding
cmd_data and weight_data). A third file holds that named data inside the .pte itself, made by
ExecuTorch's own serializer. Judge: the TOSA reference model, and the inline program's bytes.
"""

from __future__ import annotations

import contextlib
import glob
import io
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from toolkit.cli import main
from toolkit.lower.npu_ops import command_stream_operations
from toolkit.lower.pte_file import ethos_u_payloads, read_ptd, read_pte
from toolkit.npu import npu_config
from toolkit.sim import PayloadError, load_payload, simulate

ACC = "ethos-u55-128"
# the two convolutions, the transposes at the NCHW edges as 1x1 pools, a weight DMA
OPERATIONS = {
    "NPU_OP_CONV": 2,
    "NPU_OP_DMA_START": 1,
    "NPU_OP_DMA_WAIT": 1,
    "NPU_OP_POOL": 25,
    "NPU_OP_STOP": 1,
}


def _lower(out: Path, external: bool):
    """model.pte (and vela.ptd) in `out` for a conv net, with ExecuTorch 1.5.1's API."""
    from executorch.backends.arm.ethosu.compile_spec import (
        EthosUCompileSpec,
        VelaExternalBlockPlacements,
    )
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from executorch.backends.arm.util._factory import create_partitioner, create_quantizer
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 1)).eval()
    example = (torch.randn(1, 8, 8, 8),)
    placements = VelaExternalBlockPlacements(cmd_data="vela", weight_data="vela")
    spec = EthosUCompileSpec(ACC, external_block_placements=placements if external else None)
    spec.dump_intermediate_artifacts_to(str(out))
    quantizer = create_quantizer(spec)
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(
        torch.export.export(model, example).module(check_guards=False), quantizer
    )
    for _ in range(4):
        prepared(torch.randn(1, 8, 8, 8))
    converted = convert_pt2e(prepared)
    with contextlib.redirect_stdout(io.StringIO()):
        edge = to_edge_transform_and_lower(
            torch.export.export(converted, example),
            partitioner=[create_partitioner(spec)],
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
    program = edge.to_executorch()
    (out / "model.pte").write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(out))
    return program


def _inside(program, path: Path) -> None:
    """The external program with its named data moved into the .pte, by ExecuTorch's own
    serializer (the runtime reads named data from either file)."""
    from executorch.exir._serialize._named_data_store import NamedDataStoreOutput
    from executorch.exir._serialize._program import PTEFile, serialize_pte_binary

    named = program._named_data
    inside = NamedDataStoreOutput(named.buffers, dict(named.external_data["vela"]), {})
    emitted = program._emitter_output
    pte = PTEFile(emitted.program, emitted.mutable_data, inside)
    path.write_bytes(bytes(serialize_pte_binary(pte, extract_delegate_segments=True)))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("named_data")
    (root / "inline").mkdir(), (root / "external").mkdir(), (root / "inside").mkdir()
    _lower(root / "inline", external=False)
    external = _lower(root / "external", external=True)
    _inside(external, root / "inside" / "model.pte")
    return root


def test_executorch_writes_keys_in_the_pte_and_blocks_in_the_ptd(files):
    assert sorted(p.name for p in (files / "external").glob("*.pt*")) == ["model.pte", "vela.ptd"]
    (stub,) = read_pte((files / "external" / "model.pte").read_bytes(), "model.pte").payloads
    with pytest.raises(PayloadError, match="block 'cmd_data' is stored outside the payload"):
        load_payload(stub)
    named = read_ptd((files / "external" / "vela.ptd").read_bytes(), "vela.ptd")
    assert len(named) == 2 and all(len(key) == 64 for key in named)


@pytest.mark.parametrize("kind", ["external", "inside"])
def test_the_blocks_put_back_are_the_inline_payload(files, kind):
    (inline,) = ethos_u_payloads(files / "inline" / "model.pte")
    (payload,) = ethos_u_payloads(files / kind / "model.pte")
    assert payload == inline
    (stub,) = read_pte((files / kind / "model.pte").read_bytes(), kind).payloads
    assert len(stub) < len(inline)  # the delegate keeps only the keys
    counts = command_stream_operations(payload, npu_config(ACC))
    assert counts == OPERATIONS


def test_a_program_with_external_blocks_runs_bit_exact(files):
    import tosa_reference_model

    (payload,) = ethos_u_payloads(files / "external" / "model.pte")
    program = load_payload(payload)
    (tosa,) = glob.glob(str(files / "external" / "output_tag0_*.tosa"))
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = rng.integers(-128, 128, size=(1, 8, 8, 8), dtype=np.int8)
        ours = simulate(program, [x.reshape(program.inputs[0].squeezed_shape)], ACC).outputs[0]
        wanted, status = tosa_reference_model.run(Path(tosa).read_bytes(), [x])
        assert str(status).endswith("TOSA_VALID")
        assert np.array_equal(np.asarray(ours).reshape(-1), np.asarray(wanted[0]).reshape(-1))


def test_etk_diff_reads_the_pte_with_its_ptd(files, capsys):
    assert main(["diff", str(files / "inline"), str(files / "external" / "model.pte")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.endswith("0 differ in registers, 0 only in A, 0 only in B")


def test_without_its_ptd_the_missing_block_is_named(files):
    with pytest.raises(PayloadError) as caught:
        ethos_u_payloads(files / "external" / "model.pte", data_files=[])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{files / 'external' / 'model.pte'}: block 'cmd_data' is named data")
    assert message.endswith(
        "that neither the .pte nor a .ptd given holds: give the .ptd ExecuTorch wrote with it"
    )


def _damaged(data: bytes):
    """Truncations and single-byte changes over the headers and flatbuffer of a file."""
    for end in range(0, len(data), 13):
        yield data[:end]
    for pos in range(0, min(len(data), 320)):
        for value in (0xFF, data[pos] ^ 0x10):
            yield data[:pos] + bytes([value]) + data[pos + 1 :]


@pytest.mark.parametrize("name", ["vela.ptd", "model.pte"])
def test_a_damaged_file_is_one_line_never_a_crash(files, tmp_path, name):
    """Every damage is read through or refused with one PayloadError line; nothing else."""
    original = (files / "external" / name).read_bytes()
    folder = tmp_path / "copy"
    folder.mkdir()
    other = "model.pte" if name == "vela.ptd" else "vela.ptd"
    (folder / other).write_bytes((files / "external" / other).read_bytes())
    refused = 0
    for data in _damaged(original):
        (folder / name).write_bytes(data)
        try:
            for payload in ethos_u_payloads(folder / "model.pte"):
                load_payload(payload)
        except PayloadError as exc:
            assert "\n" not in str(exc) and str(exc)
            refused += 1
    assert refused > 0
