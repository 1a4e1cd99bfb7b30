"""Per-layer attribution over the zoo and the collection, and the advice on five nets, each
checked against what the command stream shows (slow: each net compiles fused and unfused).

The coverage goal: at least 95% of every program's simulated NPU cycles attributed to a layer of
the user's model with its module path and source line (it is 100% on every program today).
The cases (ethos-u55-128): DS-CNN is in test_layers.py (the default suite); here MobileNetV2
0.35, the depthwise-multiplier net and its rewrites, the mean-head net, the pixel-shuffle net and
the outlier-channel net whose int8 output needs int16 activations.
"""

from __future__ import annotations

import functools
import json
import tomllib
from pathlib import Path

import pytest

from toolkit.evaluation.layer_advice import advise
from toolkit.evaluation.layer_rewrites import DEPTHWISE_MULTIPLIER_EXAMPLE, MEAN_EXAMPLE
from toolkit.job import Job
from toolkit.models.zoo import zoo_names
from toolkit.pipeline import run_job

HERE = Path(__file__).parent
COLLECTION = HERE.parent / "collection"
NETS = tomllib.loads((COLLECTION / "nets.toml").read_text())
ADVICE_NETS = HERE / "advice_nets.py"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def collection_job(tmp_path_factory):
    """The collection's nets as tests/models/test_collection_sweep.py compiles them (the session's
    compile cache shares the programs)."""

    @functools.cache
    def build(net: str, quant: str = "int8"):
        spec, shape = NETS[net]
        return run_job(
            Job(
                model=f"{COLLECTION / spec}",
                input_shape=shape,
                npu="ethos-u55-128",
                calibration_samples=4,
                eval_samples=2,
                out_dir=tmp_path_factory.mktemp(f"layers-{net}-{quant}"),
                parallel_variants=True,
                quant=quant,
            )
        )

    return build


@pytest.fixture(scope="session")
def advice_net(tmp_path_factory):
    @functools.cache
    def build(factory: str, quant: str = "int8", variants=("fused", "unfused")):
        return run_job(
            Job(
                model=f"{ADVICE_NETS}:{factory}",
                eval_samples=2,
                variants=variants,
                out_dir=tmp_path_factory.mktemp(f"{factory}-{quant}"),
                quant=quant,
            )
        )

    return build


def _check_coverage(result) -> None:
    for name, vr in result.variants.items():
        profile = vr.layers
        assert profile.kind == "simulated", name
        assert profile.coverage >= 0.95, (name, profile.unattributed_cycles, profile.total_cycles)
        assert all(x.source.located for x in profile.layers if x.cycles), name


@pytest.mark.parametrize("model", sorted(zoo_names()))
def test_zoo_cycles_are_attributed(compiled, model):
    _check_coverage(compiled(f"zoo:{model}", eval_samples=2))


# issue 48, open: these nets' recurrent and attention operations are not yet all located (their
# coverage or source lines fall short of the bar); the cases stay, marked, until they are
@pytest.mark.parametrize("net", sorted(NETS))
def test_collection_cycles_are_attributed(collection_job, net):
    _check_coverage(collection_job(net))


def _top(profile, count=3):
    return [
        (x.source.module or x.source.call, round(profile.share(x), 3))
        for x in profile.ranked()[:count]
    ]


def test_mobilenet_v2_first_conv_edges_and_flash_weights(collection_job):
    """MobileNetV2 0.35 at 96x96: the stem conv carries the 97 pools of the NCHW input transpose
    and keeps 28% of the MACs busy (3 input channels); the last 1x1 conv waits on its weights
    from flash; an expand 1x1 conv over 8 channels is held by the output stage."""
    profile = collection_job("mobilenet_v2_035").variants["fused"].layers
    assert _top(profile) == [
        ("features.0.0", 0.272),
        ("features.18.0", 0.166),
        ("features.2.conv.0.0", 0.053),
    ]
    stem, last, expand = profile.ranked()[:3]
    assert (stem.bound, stem.added_ops) == ("lowering", {"layout": 97})
    assert (last.bound, expand.bound) == ("memory", "compute")
    advice = advise(profile)
    assert [a.kind for a in advice] == [
        "cost",
        "io-layout",
        "mac-utilisation",
        "mac-utilisation",
        "memory",
        "mac-utilisation",
    ]
    assert advice[1].figures == {"npu_ops": 97, "cycles": stem.added_cycles["layout"]}
    assert "3 input channels in IFM slices of 8 (37.5% used)" in advice[2].text
    assert "most of it on OffChipFlash" in advice[4].text
    assert "8 MACs per output element" in advice[5].text and "very low" in advice[5].mlia


def test_depthwise_multiplier_explodes_and_the_rewrites_avoid_it(advice_net):
    profile = advice_net("depthwise_multiplier").variants["fused"].layers
    assert _top(profile) == [("expand.0", 0.79), ("mean", 0.168), ("stem.0", 0.029)]
    expand, mean = profile.ranked()[:2]
    assert expand.cycles == DEPTHWISE_MULTIPLIER_EXAMPLE[0] and mean.cycles == MEAN_EXAMPLE[0]
    assert expand.kinds == {"depthwise": 2, "pool.average": 803}
    assert expand.added_by == {"Transpose": 803} and expand.bound == "lowering"
    lowering = [a for a in advise(profile) if a.kind == "lowering"]
    assert [a.layers[0] for a in lowering] == [
        "expand.0 (Conv2d) at advice_nets.py:30",
        "mean in DepthwiseMultiplier.forward at advice_nets.py:31",
    ]
    assert "runs as 805 NPU operations, 803 of them added by the lowering" in lowering[0].text
    assert "Conv2d(C, C, k, groups=C) followed by Conv2d(C, M*C, 1)" in lowering[0].text
    assert "nn.AdaptiveAvgPool2d(1)" in lowering[1].text
    # the rewrites, as the advice gives their figures
    split = advice_net("depthwise_then_pointwise", variants=("fused",)).variants["fused"].layers
    cycles = {x.source.module: x.cycles for x in split.layers}
    assert cycles["expand.0"] + cycles["expand.1"] == DEPTHWISE_MULTIPLIER_EXAMPLE[1]
    pooled = advice_net("pool_head", variants=("fused",)).variants["fused"].layers
    assert {x.source.module: x.cycles for x in pooled.layers}["pool"] == MEAN_EXAMPLE[1]


def test_mean_head_net_edges_then_its_mean(collection_job):
    profile = collection_job("mean_head_net").variants["fused"].layers
    assert [name for name, _ in _top(profile)] == ["features.0", "mean", "features.3"]
    kinds = [a.kind for a in advise(profile)]
    assert kinds[:2] == ["cost", "io-layout"] and "lowering" in kinds
    mean = profile.ranked()[1]
    assert mean.added_by == {"Transpose": 2, "Sub": 1}


def test_pixel_shuffle_is_transposes(collection_job):
    """PixelShuffle lowers to reshapes and a TRANSPOSE, which Vela runs as 1x1 pools: the
    shuffle is nearly all of the net's cycles, and etk knows no rewrite for it yet."""
    profile = collection_job("pixel_shuffle_net").variants["fused"].layers
    shuffle = profile.ranked()[0]
    assert shuffle.source.module == "shuffle" and profile.share(shuffle) > 0.9
    assert shuffle.npu_ops > 1000 and set(shuffle.kinds) == {"pool.average"}
    (lowering,) = [a for a in advise(profile) if a.kind == "lowering"]
    assert "etk knows no rewrite that avoids it yet" in lowering.text


def test_outlier_channel_gets_the_a16w8_advice_and_a16w8_helps(advice_net):
    int8 = advice_net("outlier_channel", variants=("fused",))
    profile = int8.variants["fused"].layers
    (a16w8,) = [a for a in advise(profile) if a.kind == "a16w8"]
    assert a16w8.layers == ("conv1 (Conv2d) at advice_nets.py:100",)
    assert a16w8.figures["output_sqnr_db"] < 10
    wide = advice_net("outlier_channel", quant="a16w8", variants=("fused",))
    before = int8.variants["fused"].reference.accuracy.sqnr_db
    after = wide.variants["fused"].reference.accuracy.sqnr_db
    assert after - before > 10, (before, after)
    assert not [
        a for a in advise(wide.variants["fused"].layers, quant="a16w8") if a.kind == "a16w8"
    ]


def test_ethos_u85_layers_are_vela_estimates(tmp_path):
    """corstone-320 (Ethos-U85, not simulated yet): the same attribution, Vela's estimate."""
    result = run_job(
        Job(model="zoo:conv2d_relu", target="corstone-320", variants=("fused",), out_dir=tmp_path)
    )
    vr = result.variants["fused"]
    profile = vr.layers
    assert profile.kind == "estimate" and profile.coverage == 1.0
    assert sum(x.npu_ops for x in profile.layers) == vr.program.npu_ops
    record = json.loads(result.report_path.read_text())
    assert record["variants"]["fused"]["layers"]["cycles"]["kind"] == "estimate"


def _advice_of(profile, kind):
    return [a for a in advise(profile) if a.kind == kind]


def test_chunk_is_read_in_place_and_its_halves_fill_three_quarters(advice_net):
    """x.chunk(2, 1) of a 24-channel map: no NPU operation of its own (Vela reads each half in
    place), so the cost is the stem with the NCHW input's 17 transpose pools, then the halves'
    3x3 convolutions over 12 channels, each with three quarter-empty granules."""
    profile = advice_net("chunk_net").variants["fused"].layers
    assert _top(profile) == [("stem.0", 0.464), ("left.0", 0.213), ("right.0", 0.213)]
    assert not [x for x in profile.layers if x.source.call == "chunk" and x.npu_ops]
    stem, left, right = profile.ranked()[:3]
    assert (stem.bound, stem.added_ops, left.bound, right.bound) == (
        "lowering",
        {"layout": 17},
        "compute",
        "compute",
    )
    assert (stem.cycles, left.cycles, right.cycles) == (15_888, 7_288, 7_288)
    (cost,) = _advice_of(profile, "cost")
    assert cost.figures == {"share": 0.8897, "cycles": 30_464}
    assert "MLIA ranks the same layers first" in cost.mlia
    (io,) = _advice_of(profile, "io-layout")
    assert io.figures == {"npu_ops": 17, "cycles": 8_624} and "(25.2%)" in io.text
    mac = {a.layers[0]: a for a in _advice_of(profile, "mac-utilisation")}
    half = mac["left.0 (Conv2d) at advice_nets.py:69"]
    assert half.figures["mac_utilisation"] == 0.3557
    assert (
        "Why: 12 input channels in IFM slices of 8 (75.0% used); 12 output channels in "
        "u-blocks of 8 (75.0% used); a 3x3 kernel's 9 elements in 3 steps of 4 "
        "(part-kernel-first) (75.0% used)" in half.text
    )
    assert half.mlia == "MLIA would flag this Conv2D as low MAC utilisation (under 55.0%)"
    assert "very low" in mac["stem.0 (Conv2d) at advice_nets.py:68"].mlia


def test_grouped_conv_runs_as_one_convolution_per_group(advice_net):
    """Conv2d(32, 32, 3, groups=4) on 16x16 runs as four 8 -> 8 channel convolutions
    part-kernel-first; the 1x1 stem over 3 channels with the input's transposes costs more."""
    profile = advice_net("grouped_conv").variants["fused"].layers
    assert _top(profile) == [("stem.0", 0.398), ("grouped.0", 0.315), ("project.0", 0.147)]
    stem, grouped, project = profile.ranked()[:3]
    assert [x.bound for x in (stem, grouped, project)] == ["lowering", "compute", "compute"]
    assert grouped.kinds == {"conv": 4} and not grouped.added_ops
    assert (grouped.cycles, grouped.macs) == (11_136, 589_824)
    mac = {a.layers[0]: a for a in _advice_of(profile, "mac-utilisation")}
    advice = mac["grouped.0 (Conv2d) at advice_nets.py:85"]
    assert advice.figures["mac_utilisation"] == 0.4138
    assert (
        "keeps 41.4% of the 128 MACs per cycle busy (589,824 MACs in 11,136 compute cycles). "
        "It runs as 4 convolutions; the costliest takes 8 -> 8 channels on 16x16. Why: a 3x3 "
        "kernel's 9 elements in 3 steps of 4 (part-kernel-first) (75.0% used)" in advice.text
    )
    assert advice.mlia == "MLIA would flag this Conv2D as low MAC utilisation (under 55.0%)"
    stem_advice = mac["stem.0 (Conv2d) at advice_nets.py:85"]
    assert "3 MACs per output element" in stem_advice.text and "very low" in stem_advice.mlia
    # unfused, the grouped conv's ReLU is a pool of its own: 8,640 cycles fusion saves
    unfused = advice_net("grouped_conv").variants["unfused"].layers
    relu = {x.source.module: x for x in unfused.layers}["grouped.1"]
    assert (relu.cycles, relu.kinds) == (8_640, {"pool.average": 1})


def test_bilinear_upsample_on_the_cpu_splits_the_program_and_its_edges_cost_most(
    collection_job,
):
    """upsample_net: Ethos-U55 runs no bilinear upsample, so nn.Upsample(mode="bilinear") stays
    on the CPU and the NPU program is two delegates; each delegate edge is an NCHW<->NHWC
    transpose the NPU runs as 1x1 pools: 133 of them, 90.5% of the cycles, booked to the convs
    beside the edges. --io-layout nhwc removes only the model's own edges."""
    profile = collection_job("upsample_net").variants["fused"].layers
    assert profile.delegates == 2 and profile.total_cycles == 345_485
    assert _top(profile) == [("out", 0.652), ("mid.0", 0.219), ("down.0", 0.104)]
    out, mid, down = profile.ranked()[:3]
    assert [x.bound for x in (out, mid, down)] == ["lowering"] * 3
    assert [x.added_ops for x in (out, mid, down)] == [
        {"layout": 68},
        {"layout": 32},
        {"layout": 33},
    ]
    advice = advise(profile)
    (io,) = [a for a in advice if a.kind == "io-layout"]
    assert io.figures == {"npu_ops": 133, "cycles": 312_537} and "(90.5%)" in io.text
    assert (
        "--io-layout nhwc removes them (the model then takes and returns channels-last tensors) "
        "at the model's inputs and outputs only: the program is 2 delegates around up (Upsample) "
        "at user_nets.py:107, which the CPU runs in NCHW" in io.text
    )
    (up,) = [a for a in advice if a.kind == "cpu" and a.layers[0].startswith("up (Upsample)")]
    assert "aten.upsample_bilinear2d.vec (Op is not supported on U55.)" in up.text
    assert "A nearest upsample" in up.text and "MLIA would advise the same" in up.mlia
    mac = {a.layers[0]: a for a in advice if a.kind == "mac-utilisation"}
    last = mac["out (Conv2d) at user_nets.py:107"]
    assert last.figures["mac_utilisation"] == 0.2871
    assert "Why: 3 output channels in u-blocks of 8 (37.5% used)" in last.text
    assert "very low" in last.mlia
