"""Int8 (or a16w8) quantization for Ethos-U with or without conv/linear + activation blocks.

Built on ExecuTorch's Ethos-U quantizer: the variant only changes which patterns its pattern
matcher may annotate; the QuantizationConfig is upstream's own (TOSAQuantizationConfig, so its
rules for transposed-conv weights, upsample/mean and comparisons hold in both variants).
fused: upstream's support table, where conv/linear (+ batch norm) + relu/hardtanh(0, M) is one
block with one output observer after the activation: the calibrated range [0, max], max <= M,
whose zero point -128 and qmax are the activation's saturation (decisions.py reports which bound
qmax implements). unfused: the same table without those block patterns, so the conv/linear
output gets its own observer and the activation shares it: an explicit CLAMP stays in the TOSA
graph. a16w8 (int16 activations, symmetric: zero point 0, qmin -32767): no saturation is the
activation, so a fused block keeps its [0, max] quantization and an explicit CLAMP too
(SymmetricBlockCheck, split_blocks_above_qmin).
"""

from __future__ import annotations

from dataclasses import fields

import torch
from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.quantizer import (
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.quantizer.quantization_config import (
    QuantizationConfig,
    TOSAQuantizationConfig,
)
from executorch.backends.arm.quantizer.quantizer_support import (
    FUSED_RELU_OP_PATTERNS,
    TOSA_QUANTIZER_SUPPORT_DICT,
    ReluFusedPatternCheck,
)
from executorch.backends.arm.util._factory import create_quantizer
from executorch.backends.cortex_m.quantizer.pattern_matcher import PatternMatcher
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from ..artifacts import CalibrationSet, LoadedModel, Quant, QuantizedModel, Variant
from ..errors import UserError
from ..npu import NpuConfig
from ..rewrites import apply_rewrites
from ..rewrites.channel_shuffle import SHUFFLE_CONV
from .activation_errors import activation_errors
from .activations import HARDTANH_TARGETS, RELU_TARGETS, canonicalize_activations
from .decisions import BLOCK_PARENTS, QUANTIZE, fusion_decisions, lower_bound
from .observe import calibrate
from .same_padding import explicit_same_padding


def compile_spec(npu: NpuConfig, extra_vela: tuple[str, ...] = ()) -> EthosUCompileSpec:
    """The spec ExecuTorch compiles with; `extra_vela` reaches the Vela run that makes the .pte."""
    return EthosUCompileSpec(
        npu.accelerator,
        system_config=npu.system_config,
        memory_mode=npu.memory_mode,
        config_ini=npu.config_ini,
        extra_flags=list(extra_vela),
    )


class SymmetricBlockCheck(ReluFusedPatternCheck):
    """Upstream's block check without its refusal of symmetric output quantization (a16w8).

    Upstream declines conv/linear + activation blocks when activations are symmetric: zero point
    0 is not qmin (-32767 for int16), so the RESCALE's saturation cannot be the ReLU. The block's
    single observer after the activation still gives its range [0, max]; the activation then
    stays an explicit CLAMP(0, qmax) on that quantization (split_blocks_above_qmin).
    """

    @classmethod
    def check_quantization_config(cls, pattern, quantization_config):
        return quantization_config is None or (
            quantization_config.get_output_act_qspec(pattern[-1]) is not None
        )


def support_table(variant: Variant, quant: Quant = "int8") -> dict:
    """Upstream's pattern table; without the conv/linear + activation blocks for unfused; for
    fused a16w8, with those blocks accepted under symmetric quantization."""
    blocks = set(FUSED_RELU_OP_PATTERNS)
    if variant != "fused":
        return {p: check for p, check in TOSA_QUANTIZER_SUPPORT_DICT.items() if p not in blocks}
    table = dict(TOSA_QUANTIZER_SUPPORT_DICT)
    if quant == "a16w8":
        table.update({p: SymmetricBlockCheck for p in blocks})
    return table


class EtkQuantizationConfig(TOSAQuantizationConfig):
    """Upstream's TOSA config (every upstream rule holds), plus: the 1x1 convolutions of
    channel-shuffle-as-conv keep their input's quantization.

    A channel permutation does not change the set of values and the view/transpose it replaces
    shared its producer's qparams; an observer of its own (even one on the input edge: the
    producer's may also have seen a concat's other inputs) calibrates another scale and
    requantizes every value. Shared, with the weight 127 at scale 1/127, the convolution
    reproduces its input exactly (toolkit/rewrites/channel_shuffle.py).
    """

    def get_input_act_qspec(self, node=None, input_node=None):
        if node is not None and node.meta.get(SHUFFLE_CONV) and input_node is node.args[0]:
            return SharedQuantizationSpec(input_node)  # the producer's own observer
        return super().get_input_act_qspec(node, input_node)

    def get_output_act_qspec(self, node=None):
        if node is not None and node.meta.get(SHUFFLE_CONV):
            return SharedQuantizationSpec((node.args[0], node))
        return super().get_output_act_qspec(node)


def base_config(quant: Quant) -> EtkQuantizationConfig:
    """Upstream's int8 config (per-channel weights), or its a16w8 one: int16 activations
    (symmetric, [-32767, 32767]), int8 per-channel weights, int32 bias."""
    base = (
        get_symmetric_a16w8_quantization_config(is_per_channel=True)
        if quant == "a16w8"
        else get_symmetric_quantization_config(is_per_channel=True)
    )
    return EtkQuantizationConfig(**{f.name: getattr(base, f.name) for f in fields(base)})


def make_quantizer(
    npu: NpuConfig,
    variant: Variant,
    config: QuantizationConfig | None = None,
    quant: Quant = "int8",
):
    """config replaces upstream's default (tests force qparams with a TOSAQuantizationConfig
    subclass: a plain QuantizationConfig loses upstream's rules, such as pools, upsample and
    mean sharing their input's qparams, which the TOSA lowering assumes)."""
    quantizer = create_quantizer(compile_spec(npu))
    if config is None:
        config = base_config(quant)
    quantizer.quantizer.pattern_matcher = PatternMatcher(
        support_table(variant, quant), f"etk-{variant}"
    )
    quantizer.set_global(config)
    return quantizer


def export_module(model: LoadedModel) -> torch.fx.GraphModule:
    try:
        # check_guards=False: torch 2.13 otherwise adds a _guards_fn call_module node that
        # ExecuTorch's Arm passes reject (facts: DecomposeAvgPool2dPass).
        return torch.export.export(model.module, model.example_inputs).module(check_guards=False)
    except Exception as exc:  # torch raises many types here; all mean the same to the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"model '{model.spec}' failed to export with torch.export: {first} "
            "(check the input shape, or make the model export-friendly)"
        ) from exc


RAISED_ZERO_POINT = "etk_raised_zero_point"  # node meta: (zero point, qmin) of a split block


def split_blocks_above_qmin(graph: torch.fx.GraphModule) -> int:
    """Give a block whose output zero point is above qmin an explicit quantize/dequantize between
    its conv/linear and its activation, with the block's own output qparams.

    ExecuTorch 1.5.1's FuseQuantizedActivationPass would drop the activation and raise the output
    quantize's qmin to the zero point, but nothing downstream reads that qmin: the RESCALE still
    saturates at -128, so real negatives between qmin and the zero point leak through and the
    ReLU is lost. Split like this, the block keeps its single [0, max] quantization and the
    activation lowers to CLAMP(zero point, qmax) on it, which Vela folds into the conv's output
    stage: the raised qmin, implemented.
    """
    count = 0
    for act in list(graph.graph.nodes):
        if act.op != "call_function" or act.target not in set(RELU_TARGETS) | set(HARDTANH_TARGETS):
            continue
        producer = act.args[0]
        users = list(act.users)
        if (
            not isinstance(producer, torch.fx.Node)
            or producer.target not in BLOCK_PARENTS
            or lower_bound(act) != 0.0
            or len(users) != 1
            or users[0].target not in QUANTIZE
        ):
            continue
        quant = users[0]
        zero_point, qmin = int(quant.args[2]), int(quant.args[3])
        if zero_point <= qmin:
            continue
        with graph.graph.inserting_before(act):
            q = graph.graph.call_function(quant.target, (producer, *quant.args[1:]), quant.kwargs)
            dq = graph.graph.call_function(
                torch.ops.quantized_decomposed.dequantize_per_tensor.default,
                (q, *quant.args[1:]),
                quant.kwargs,
            )
        for node in (q, dq):
            node.meta = {k: v for k, v in producer.meta.items() if k != "val"}
            if "val" in producer.meta:
                node.meta["val"] = producer.meta["val"]
        act.replace_input_with(producer, dq)
        act.meta[RAISED_ZERO_POINT] = (zero_point, qmin)
        count += 1
    if count:
        graph.graph.lint()
        graph.recompile()
    return count


def quantize(
    model: LoadedModel,
    calibration: CalibrationSet,
    variant: Variant,
    npu: NpuConfig,
    config: QuantizationConfig | None = None,
    rewrites: tuple[str, ...] = (),
    quant: Quant = "int8",
) -> QuantizedModel:
    graph = export_module(model)
    canonicalize_activations(graph)
    explicit_same_padding(graph)
    rewrite_records = apply_rewrites(graph, rewrites)
    prepared = prepare_pt2e(graph, make_quantizer(npu, variant, config, quant))
    calibrate(prepared, calibration.samples, calibration.source)
    converted = convert_pt2e(prepared)
    if variant == "fused":
        split_blocks_above_qmin(converted)
    errors = activation_errors(converted, calibration.samples) if quant == "int8" else ()
    return QuantizedModel(
        variant,
        converted,
        model.example_inputs,
        fusion_decisions(converted),
        rewrite_records,
        errors,
    )
