"""What to change in the user's model, each item with the figure behind it.

From a program's per-layer profile (layer_profile.py): the layers that cost most; layers far
below the MAC array's peak and why (channel counts against the u-block, small OFM blocks,
depthwise); calls whose lowering explodes into many NPU operations, with a rewrite that avoids it
where one is known; the NCHW edge transposes `--io-layout nhwc` removes; memory-bound layers;
operators left to the CPU; lookup-table activations. Where Arm's ML Inference Advisor (MLIA)
would advise the same from Vela's estimate, the item says so: MLIA ranks high-impact layers by
their share of the cycles, flags Conv2D MAC utilisation under 30 % ("very low") and 55 % ("low")
and depthwise under 3 %, calls a layer memory-bound when a memory's access cycles exceed its NPU
cycles, and advises against LUT-based activations and CPU-only operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .layer_profile import LayerProfile, ProgramProfile
from .layer_rewrites import known_rewrite
from .op_figures import OpShape

TOP_LAYERS = 3
HIGH_IMPACT_SHARE = 0.05  # layers below this share of the cycles get no per-layer advice
CONV_LOW, CONV_VERY_LOW, DEPTHWISE_LOW = 0.55, 0.30, 0.03  # MLIA's MAC utilisation thresholds
EXPLOSION_OPS = 8  # NPU operations added to one call that make it an explosion
# a layer's int8 output below this median channel SQNR keeps too few steps for 8 bits (random
# and trained nets keep 40 to 50 dB per layer; an outlier channel 100x the others: 4 dB)
A16W8_SQNR_DB = 30.0
LUT_CALLS = frozenset(
    {"sigmoid", "tanh", "softmax", "log_softmax", "gelu", "elu", "silu", "hardswish", "mish"}
    | {"softplus", "selu", "exp", "hardsigmoid", "logsigmoid"}
)


@dataclass(frozen=True)
class Advice:
    kind: str  # "cost", "mac-utilisation", "lowering", "io-layout", "memory", "cpu", "activation"
    layers: tuple[str, ...]  # the layers it is about (LayerSource.describe())
    text: str  # what the figures say and what to change
    figures: dict[str, float | int | str] = field(default_factory=dict)
    mlia: str = ""  # what Arm's MLIA would say of the same layers, when it would


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _cost(profile: ProgramProfile) -> list[Advice]:
    top = profile.ranked()[:TOP_LAYERS]
    if not top:
        return []
    lines = [
        f"{layer.source.describe()}: {layer.cycles:,} cycles ({_pct(profile.share(layer))}), "
        f"{layer.bound}-bound"
        for layer in top
    ]
    share = sum(profile.share(layer) for layer in top)
    return [
        Advice(
            "cost",
            tuple(layer.source.describe() for layer in top),
            f"The {len(top)} costliest layers take {_pct(share)} of the {profile.kind} NPU "
            "cycles: " + "; ".join(lines) + ".",
            {"share": round(share, 4), "cycles": sum(layer.cycles for layer in top)},
            "MLIA ranks the same layers first among its high-impact layers",
        )
    ]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _output_stage(shape: OpShape, peak_macs: int) -> tuple[float, str] | None:
    """The output stage's loss: too few MACs per OFM element to keep the array busy."""
    (_, _, ic), (kh, kw) = shape.ifm, shape.kernel[:2]
    per_element = kh * kw * (1 if shape.kind == "depthwise" else ic)
    kept = per_element / (shape.output_cycles * peak_macs) if shape.output_cycles else 1.0
    if kept >= 0.95:
        return None
    channels = "" if shape.kind == "depthwise" else f"{ic} input channels x "
    return (
        kept,
        f"{per_element} MACs per output element ({channels}{kh}x{kw} kernel): the output stage "
        f"writes {1 / shape.output_cycles:g} elements per cycle, {peak_macs / per_element:.3g} "
        "would keep the MACs busy",
    )


def _ifm_depth(shape: OpShape) -> tuple[float, str] | None:
    """A convolution works through the IFM depth in slices (8 channels a step part-kernel-first,
    else 32 at 8 bits and 16 at 16 bits); a depthwise convolution has one channel per output."""
    (_, _, ic), (kh, kw) = shape.ifm, shape.kernel[:2]
    if shape.kind == "depthwise":
        elements = kh * kw
        kept = elements / (4 * _ceil(elements, 4)) / 8
        return kept, f"a depthwise {kh}x{kw} convolution takes one IFM channel per output, not 8"
    granule = 8 if shape.part_kernel_first else (32 if shape.ifm_bytes == 1 else 16)
    slots = granule * _ceil(ic, granule)
    if ic >= slots:
        return None
    plural = "s" if ic > 1 else ""
    return ic / slots, f"{ic} input channel{plural} in IFM slices of {granule}"


def _block(shape: OpShape) -> tuple[float, str] | None:
    """The weight decoder feeds one u-block depth of weights per cycle: a small OFM block reuses
    each weight too few times to keep up."""
    (oh, ow, _), (uh, uw, uc) = shape.ofm, shape.ublock
    bh, bw = min(shape.block[0], oh), min(shape.block[1], ow)
    xy = _ceil(bh, uh) * _ceil(bw, uw)
    if shape.kind != "conv" or xy >= uc:
        return None
    return xy / uc, f"a {bh}x{bw} OFM block ({xy} u-blocks per weight; {uc} keep the decoder up)"


def _kernel_steps(shape: OpShape) -> tuple[float, str] | None:
    """Part-kernel-first, a convolution takes its kernel elements 4 a step (2 at 16 bits) over
    8 IFM channels: a 3x3 kernel's 9 elements fill 3 steps of 4."""
    if shape.kind != "conv" or not shape.part_kernel_first:
        return None
    kh, kw = shape.kernel[:2]
    per_step = 2 if shape.ifm_bytes > 1 else 4
    elements = kh * kw
    if elements % per_step == 0:
        return None
    steps = _ceil(elements, per_step)
    return (
        elements / (steps * per_step),
        f"a {kh}x{kw} kernel's {elements} element{'s' if elements > 1 else ''} in {steps} "
        f"step{'s' if steps > 1 else ''} of {per_step} (part-kernel-first)",
    )


def _u_blocks(shape: OpShape) -> list[tuple[float, str]]:
    """OFM channels and positions that do not fill whole u-blocks."""
    (oh, ow, oc), (uh, uw, uc) = shape.ofm, shape.ublock
    losses = []
    if oc % uc:
        losses.append((oc / (uc * _ceil(oc, uc)), f"{oc} output channels in u-blocks of {uc}"))
    spatial = oh * ow / (uh * _ceil(oh, uh) * uw * _ceil(ow, uw))
    if spatial < 0.95:
        losses.append((spatial, f"a {oh}x{ow} output in {uh}x{uw} u-blocks"))
    return losses


def mac_losses(shape: OpShape, peak_macs: int) -> list[tuple[float, str]]:
    """(fraction of the MAC array kept busy, why) for each loss the operation's shape causes,
    the largest first."""
    found = [
        _output_stage(shape, peak_macs),
        _ifm_depth(shape),
        _kernel_steps(shape),
        _block(shape),
    ]
    return sorted([loss for loss in found if loss is not None] + _u_blocks(shape))


def _mac_advice(profile: ProgramProfile, layer: LayerProfile) -> Advice | None:
    utilisation = layer.mac_utilisation(profile.peak_macs)
    depthwise = layer.shape is not None and layer.shape.kind == "depthwise"
    limit = DEPTHWISE_LOW if depthwise else CONV_LOW
    if utilisation is None or utilisation >= limit:
        return None
    severity = "very low" if not depthwise and utilisation < CONV_VERY_LOW else "low"
    why = ""
    if layer.shape is not None:
        losses = mac_losses(layer.shape, profile.peak_macs)
        if losses:
            why = " Why: " + "; ".join(
                f"{reason} ({_pct(kept)} used)" for kept, reason in losses[:3]
            )
    matmul = layer.shape is not None and layer.shape.kind == "matmul"
    kind = "DepthwiseConv2D" if depthwise else ("MatMul" if matmul else "Conv2D")
    return Advice(
        "mac-utilisation",
        (layer.source.describe(),),
        f"{layer.source.describe()} keeps {_pct(utilisation)} of the {profile.peak_macs} MACs per "
        f"cycle busy ({layer.macs:,} MACs in {layer.mac_cycles:,} compute cycles)."
        f"{_split(layer)}{why}",
        {"mac_utilisation": round(utilisation, 4), "macs": layer.macs},
        f"MLIA would flag this {kind} as {severity} MAC utilisation "
        f"(under {_pct(CONV_VERY_LOW if severity == 'very low' else limit)})",
    )


def _split(layer: LayerProfile) -> str:
    """A call that runs as several convolutions (a grouped convolution, one per group; a
    convolution Vela splits by output channels), as the command stream shows it."""
    shape, convolutions = layer.shape, layer.kinds.get("conv", 0)
    if shape is None or shape.kind != "conv" or convolutions < 2 or layer.added_ops:
        return ""
    (h, w, ic), oc = shape.ifm, shape.ofm[2]
    return (
        f" It runs as {convolutions} convolutions; the costliest takes {ic} -> {oc} channels "
        f"on {h}x{w}."
    )


def _lowering_advice(profile: ProgramProfile, layer: LayerProfile) -> Advice | None:
    added = layer.added_ops.get("lowering", 0)
    cycles = layer.added_cycles.get("lowering", 0)
    if added < EXPLOSION_OPS and cycles < 0.3 * layer.cycles:
        return None
    by = ", ".join(f"{n} {op}" for op, n in sorted(layer.added_by.items(), key=lambda i: -i[1]))
    rewrite = known_rewrite(layer)
    return Advice(
        "lowering",
        (layer.source.describe(),),
        f"{layer.source.describe()}: its {layer.source.call} runs as {layer.npu_ops} NPU "
        f"operations, {added} of them added by the lowering ({by}); they take {cycles:,} of its "
        f"{layer.cycles:,} cycles ({_pct(cycles / profile.total_cycles)} of the program). "
        + (rewrite or "etk knows no rewrite that avoids it yet."),
        {"npu_ops": layer.npu_ops, "added_ops": added, "added_cycles": cycles},
    )


def _memory_advice(profile: ProgramProfile, layer: LayerProfile) -> Advice | None:
    if layer.bound != "memory" or not layer.traffic:
        return None
    memory, (read, written) = max(layer.traffic.items(), key=lambda item: sum(item[1]))
    return Advice(
        "memory",
        (layer.source.describe(),),
        f"{layer.source.describe()} waits on memory: {layer.memory_bound_cycles:,} of its "
        f"{layer.cycles:,} cycles are operations whose traffic takes longer than their "
        f"{layer.compute_cycles:,} compute cycles; most of it on {memory} ({read:,} bytes read, "
        f"{written:,} written).",
        {"memory_bound_cycles": layer.memory_bound_cycles, "memory": memory},
        "MLIA would call it possibly memory-bound (memory access cycles above NPU cycles)",
    )


BILINEAR_HINT = (
    " A nearest upsample (nn.Upsample(scale_factor=2), F.interpolate(mode='nearest')) runs on "
    "the NPU, as one average pool; it is a different function: retrain with it."
)
# the CPU operators at a program's own inputs and outputs; any other splits the NPU program
IO_QUANTIZE = frozenset({"quantize_per_tensor", "dequantize_per_tensor"})


def _what_removes_them(profile: ProgramProfile) -> str:
    """--io-layout nhwc changes the model's own inputs and outputs; between delegates, around
    an operator the CPU runs in NCHW, the transposes stay."""
    between = [
        layer.source.describe()
        for layer in profile.layers
        if layer.cpu_ops and layer.source.call not in IO_QUANTIZE
    ]
    nhwc = "--io-layout nhwc removes them (the model then takes and returns channels-last tensors)"
    if profile.delegates < 2 or not between:
        return nhwc + "."
    return (
        f"{nhwc} at the model's inputs and outputs only: the program is {profile.delegates} "
        f"delegates around {', '.join(between)}, which the CPU runs in NCHW, and the "
        "transposes at those delegates' edges stay until it runs on the NPU."
    )


def _io_layout(profile: ProgramProfile, io_layout: str) -> list[Advice]:
    edges = [layer for layer in profile.layers if layer.added_ops.get("layout")]
    if io_layout != "nchw" or not edges:
        return []
    cycles = sum(layer.added_cycles["layout"] for layer in edges)
    ops = sum(layer.added_ops["layout"] for layer in edges)
    return [
        Advice(
            "io-layout",
            tuple(layer.source.describe() for layer in edges),
            f"The NCHW<->NHWC transposes ExecuTorch put at the NPU's edges run as {ops} NPU "
            f"operations taking {cycles:,} cycles ({_pct(cycles / profile.total_cycles)}), "
            f"booked to {', '.join(layer.source.describe() for layer in edges)}. "
            + _what_removes_them(profile),
            {"npu_ops": ops, "cycles": cycles},
        )
    ]


def _cpu_and_activations(profile: ProgramProfile) -> list[Advice]:
    advice = []
    for layer in profile.layers:
        if layer.cpu_ops:
            bilinear = any("upsample_bilinear2d" in op for op in layer.cpu_ops)
            advice.append(
                Advice(
                    "cpu",
                    (layer.source.describe(),),
                    f"{layer.source.describe()} runs on the CPU: {'; '.join(layer.cpu_ops)}."
                    + (BILINEAR_HINT if bilinear else ""),
                    {"cpu_ops": len(layer.cpu_ops)},
                    "MLIA would advise the same: operators the NPU supports run faster",
                )
            )
        if layer.source.call in LUT_CALLS and (layer.cpu_ops or profile.share(layer) >= 0.01):
            advice.append(
                Advice(
                    "activation",
                    (layer.source.describe(),),
                    f"{layer.source.describe()}: {layer.source.call} runs through a lookup table "
                    f"({layer.cycles:,} NPU cycles); ReLU or ReLU6 fuse into the layer before "
                    "at no cost where the model allows them.",
                    {"cycles": layer.cycles},
                    "MLIA would advise replacing this activation with an NPU-friendly one",
                )
            )
    return advice


def _a16w8(profile: ProgramProfile) -> list[Advice]:
    """Layers whose int8 output keeps too little of their signal (quantize/activation_errors)."""
    coarse = [
        layer
        for layer in profile.layers
        if layer.output_sqnr_db is not None and layer.output_sqnr_db < A16W8_SQNR_DB
    ]
    return [
        Advice(
            "a16w8",
            (layer.source.describe(),),
            f"{layer.source.describe()}: its int8 output keeps {layer.output_sqnr_db:.1f} dB of "
            f"its signal on the calibration inputs (median over its channels; "
            f"{_pct(layer.output_clipped)} of values beyond the calibrated range): too few "
            "steps for 8 bits. --quant a16w8 (int16 activations, int8 weights) makes each step "
            "256 times finer; its 16-bit feature maps cost NPU cycles.",
            {"output_sqnr_db": layer.output_sqnr_db or 0.0, "clipped": layer.output_clipped},
        )
        for layer in coarse
    ]


def advise(
    profile: ProgramProfile, io_layout: str = "nchw", quant: str = "int8"
) -> tuple[Advice, ...]:
    """Every item of advice for one program, the costliest layers first."""
    advice = _cost(profile) + _io_layout(profile, io_layout)
    if quant == "int8":
        advice += _a16w8(profile)
    for layer in profile.ranked():
        if profile.share(layer) < HIGH_IMPACT_SHARE:
            continue
        for rule in (_lowering_advice, _mac_advice, _memory_advice):
            item = rule(profile, layer)
            if item is not None:
                advice.append(item)
    return tuple(advice + _cpu_and_activations(profile))
