"""Where the cycles go, per layer of the user's model, on programs the default suite compiles
anyway (the zoo's conv2d_relu and DS-CNN): attribution, figures, advice, report.json, the
terminal table and report.html (`etk report OUT --html` too)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from toolkit.cli import main as etk_main
from toolkit.evaluation.layer_advice import advise, mac_losses
from toolkit.evaluation.layer_profile import profile_program
from toolkit.evaluation.op_figures import OpShape
from toolkit.report.tables import print_result


@pytest.fixture(scope="module")
def conv2d_relu(compiled):
    return compiled("zoo:conv2d_relu")


@pytest.fixture(scope="module")
def ds_cnn(compiled):
    return compiled("zoo:ds_cnn", eval_samples=2)


@pytest.mark.parametrize("model", ["conv2d_relu", "ds_cnn"])
def test_every_npu_cycle_is_attributed_to_a_module_and_line(request, model):
    result = request.getfixturevalue(model)
    for name, vr in result.variants.items():
        profile = vr.layers
        assert profile.kind == "simulated", name
        assert profile.total_cycles > 0 and profile.unattributed_cycles == 0, name
        assert profile.coverage == 1.0
        for layer in profile.layers:
            assert layer.source.located, layer.source
            assert layer.source.file in ("tiny.py", "mlperf_tiny.py"), layer.source


def test_conv2d_relu_edge_transposes_are_booked_to_its_conv_as_layout(conv2d_relu):
    profile = conv2d_relu.variants["fused"].layers
    (layer,) = profile.layers
    assert layer.source.describe() == "body.0 (Conv2d) at tiny.py:32"
    assert layer.kinds == {"conv": 1, "pool.average": layer.added_ops["layout"]}
    assert layer.npu_ops == conv2d_relu.variants["fused"].program.npu_ops
    assert layer.bound == "lowering"
    (io,) = [a for a in advise(profile) if a.kind == "io-layout"]
    assert io.figures == {
        "npu_ops": layer.added_ops["layout"],
        "cycles": layer.added_cycles["layout"],
    }
    assert "--io-layout nhwc removes them" in io.text


def test_ds_cnn_costliest_layers_and_advice(ds_cnn):
    """DS-CNN on ethos-u55-128: its first convolution (10x4 over the one-channel MFCC map) costs
    most and keeps a tenth of the MACs busy; the depthwise layers follow."""
    profile = ds_cnn.variants["fused"].layers
    top = profile.ranked()[:3]
    assert top[0].source.module == "features.0.0"
    assert {layer.source.module for layer in top[1:]} <= {
        "features.1.0",
        "features.3.0",
        "features.5.0",
        "features.7.0",
    }
    assert all(layer.shape.kind == "depthwise" for layer in top[1:])
    assert profile.share(top[0]) == pytest.approx(0.291, abs=0.005)
    assert top[0].mac_utilisation(profile.peak_macs) == pytest.approx(0.098, abs=0.002)
    advice = {a.kind: a for a in advise(profile)}
    assert set(advice) == {"cost", "mac-utilisation"}
    mac = advice["mac-utilisation"]
    assert mac.layers == ("features.0.0 (Conv2d) at mlperf_tiny.py:71",)
    assert "1 input channel in IFM slices of 8 (12.5% used)" in mac.text
    assert "very low" in mac.mlia
    # fusion changes no NPU operation of DS-CNN: the same cycles per layer
    unfused = {x.key: x.cycles for x in ds_cnn.variants["unfused"].layers.layers}
    assert {x.key: x.cycles for x in profile.layers} == unfused


def test_report_json_carries_the_per_layer_record(ds_cnn):
    report = json.loads(ds_cnn.report_path.read_text())
    record = report["variants"]["fused"]["layers"]
    assert record["format"] == 1
    assert record["cycles"]["kind"] == "simulated" and record["cycles"]["attributed"] == 1.0
    assert record["cycles"]["total"] == sum(x["cycles"] for x in record["layers"])
    first = record["layers"][0]
    assert (first["module"], first["module_type"], first["file"], first["line"]) == (
        "features.0.0",
        "Conv2d",
        "mlperf_tiny.py",
        71,
    )
    # Vela splits the convolution's 64 output channels into two operations (48 and 16)
    assert first["macs"] == 320_000 and first["operation_kinds"] == {"conv": 2}
    rows = {row["key"]: row for row in report["comparison"]["layers"]}
    conv = rows[first["key"]]
    assert conv["fused_cycles"] == conv["unfused_cycles"] == first["cycles"]
    assert conv["activation"] == "relu" and conv["activation_fused"] is True


def test_terminal_shows_the_costliest_layers(ds_cnn):
    console = Console(record=True, width=200)
    print_result(ds_cnn, console)
    text = console.export_text()
    assert "costliest layers (simulated cycles; 100.0% of" in text
    assert "features.0.0 (Conv2d)" in text and "mlperf_tiny.py:71" in text
    assert "advice: features.0.0 (Conv2d) at mlperf_tiny.py:71 keeps 9.8%" in text
    narrow = Console(record=True, width=80)  # a non-tty: names wrap, none is cut short
    print_result(ds_cnn, narrow)
    table = narrow.export_text().split("costliest layers")[1].split("advice:")[0]
    assert "…" not in table and "features.0.0" in table and "(Conv2d)" in table


def test_report_html_beside_report_json_and_from_etk_report(ds_cnn, tmp_path, capsys):
    written = ds_cnn.report_path.with_name("report.html").read_text()
    for layer in ds_cnn.variants["fused"].layers.layers:
        assert f"{layer.source.describe()}</div>" in written
    assert written.count('class="bar"') == 2 * len(ds_cnn.variants["fused"].layers.layers)
    # a copy of the report alone is enough to make it again
    (tmp_path / "report.json").write_text(ds_cnn.report_path.read_text())
    assert etk_main(["report", str(tmp_path), "--html"]) == 0
    assert (tmp_path / "report.html").read_text() == written
    assert etk_main(["report", str(tmp_path)]) == 2
    assert "is a job's folder: pass --html" in capsys.readouterr().err


def test_an_npu_the_simulator_does_not_run_gets_vela_estimate(conv2d_relu, monkeypatch):
    """Where the simulator does not run the NPU (Ethos-U85 today), the layers carry Vela's
    per-operation estimate, labelled, and the kernel operations counted in the stream."""
    monkeypatch.setattr("toolkit.sim.simulates", lambda name: False)
    program = conv2d_relu.variants["fused"].program
    profile = profile_program(program)
    assert profile.kind == "estimate" and profile.pmu_total is None
    estimates = program.delegates[0].attribution.estimates
    assert profile.total_cycles == sum(e.op_cycles for e in estimates)
    assert sum(x.npu_ops for x in profile.layers) == program.npu_ops
    assert profile.coverage == 1.0


def test_mac_losses_name_the_shape_that_wastes_the_array():
    # DS-CNN's first layer on ethos-u55-128: 10x4 kernel over one channel, 64 outputs on 25x5
    shape = OpShape("conv", (49, 10, 1), (25, 5, 64), (10, 4, 2, 2), (10, 6, 16), (1, 2, 8), 1, 0.5)
    losses = mac_losses(shape._replace(part_kernel_first=True), 128)
    assert [(round(kept, 4), why) for kept, why in losses] == [
        (0.125, "1 input channel in IFM slices of 8"),
        (
            0.625,
            "40 MACs per output element (1 input channels x 10x4 kernel): the output stage "
            "writes 2 elements per cycle, 3.2 would keep the MACs busy",
        ),
        (0.8333, "a 25x5 output in 1x2 u-blocks"),
    ]
    # a depthwise 3x3: nine kernel elements in steps of four, one IFM channel per output
    depthwise = OpShape(
        "depthwise", (25, 5, 64), (25, 5, 64), (3, 3, 1, 1), (14, 6, 16), (1, 2, 8), 1, 0.5
    )
    kept, why = min(mac_losses(depthwise, 128))
    assert kept == pytest.approx(9 / 12 / 8)
    assert why == "a depthwise 3x3 convolution takes one IFM channel per output, not 8"
    # one group of Conv2d(32, 32, 3, groups=4) on 16x16, part-kernel-first: nine kernel elements
    # fill three steps of four, eight channels fill the slice and the u-block
    group = OpShape(
        "conv", (16, 16, 8), (16, 16, 8), (3, 3, 1, 1), (12, 16, 8), (1, 2, 8), 1, 0.5, True
    )
    assert mac_losses(group, 128) == [
        (0.75, "a 3x3 kernel's 9 elements in 3 steps of 4 (part-kernel-first)")
    ]
    assert mac_losses(group._replace(kernel=(1, 1, 1, 1)), 128)[1] == (
        0.25,
        "a 1x1 kernel's 1 element in 1 step of 4 (part-kernel-first)",
    )


def test_operations_passes_make_keep_the_call_they_were_made_for(tmp_path):
    """At batch 2 the sigmoid's TABLE (made by ExecuTorch's InsertTableOpsPass without the
    node's metadata) runs as an NPU operation of its own, and batched-1x1-conv-as-image adds
    reshapes: each is booked to the module it came from."""
    from pathlib import Path

    from toolkit.job import Job
    from toolkit.pipeline import run_job

    net = Path(__file__).parents[1] / "collection" / "held_out_kinds.py"
    result = run_job(
        Job(
            model=f"{net}:squeeze_excite", input_shape="2,3,16,16", out_dir=tmp_path, eval_samples=1
        )
    )
    for name, vr in result.variants.items():
        assert all(x.source.located for x in vr.layers.layers if x.cycles), name
    sigmoid = {x.source.module: x for x in result.variants["fused"].layers.layers}["excite.3"]
    assert (sigmoid.source.module_type, sigmoid.kinds) == ("Sigmoid", {"pool.average": 1})


def test_a_matmul_is_mac_work_of_its_own_kind_with_no_weight_decoder_loss():
    from toolkit.artifacts import LayerSource
    from toolkit.evaluation.layer_profile import LayerProfile
    from toolkit.evaluation.op_figures import OpFigures

    # Q.K^T of the attention test on ethos-u85-256 (test_u85_execution.py): 108 compute cycles
    shape = OpShape("matmul", (1, 6, 8), (1, 6, 6), (1, 1, 1, 1), (1, 6, 6), (1, 2, 16), 1, 0.25)
    layer = LayerProfile(LayerSource("", "Attention", "matmul", "matmul"))
    layer.add(OpFigures(0x1C0, "matmul", 108, 108, 288, False, {}, shape), None, 0)
    assert (layer.kinds, layer.mac_cycles, layer.macs) == ({"matmul": 1}, 108, 288)
    # its "weights" are IFM2, not a decoded stream: only a convolution is told about the decoder
    decoder = "a 1x6 OFM block (3 u-blocks per weight; 16 keep the decoder up)"
    assert (0.1875, decoder) in mac_losses(shape._replace(kind="conv"), 256)
    assert decoder not in [why for _, why in mac_losses(shape, 256)]
