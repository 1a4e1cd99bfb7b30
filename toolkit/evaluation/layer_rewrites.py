"""Rewrites of the user's model that avoid a lowering's explosion into many NPU operations.

Each entry names the pattern as the per-layer profile sees it (the torch call, the kinds of NPU
operations it ran, what the lowering added) and a change to the model that computes the same
function with far fewer operations, with the figures measured on a small example (etk's cycle
model, ethos-u55-128, Ethos_U55_High_End_Embedded/Shared_Sram; the examples are
tests/report/advice_nets.py, their figures pinned in tests/report/test_layer_advice.py).
"""

from __future__ import annotations

from .layer_profile import LayerProfile

# (simulated cycles of the call as written, of the rewrite) on the examples
DEPTHWISE_MULTIPLIER_EXAMPLE = (358_880, 9_232)
MEAN_EXAMPLE = (76_407, 4_440)


def _depthwise_multiplier(layer: LayerProfile) -> str | None:
    if not (layer.kinds.get("depthwise") and layer.added_by.get("Transpose")):
        return None
    before, after = DEPTHWISE_MULTIPLIER_EXAMPLE
    return (
        "A depthwise convolution with a channel multiplier (groups = in_channels < "
        "out_channels) is lowered by Vela into transposes around multiplier-1 depthwise "
        "convolutions. Write it as Conv2d(C, C, k, groups=C) followed by Conv2d(C, M*C, 1) "
        f"(a 16->32-channel 3x3 on 16x16: {before:,} -> {after:,} cycles), or as a full "
        "Conv2d when C is small."
    )


def _mean(layer: LayerProfile) -> str | None:
    if layer.source.call != "mean" or not layer.added_by:
        return None
    before, after = MEAN_EXAMPLE
    return (
        "A mean over H and W of an NCHW tensor (x.mean((2, 3))) lowers into transposes, "
        "REDUCE_SUMs and a subtraction; nn.AdaptiveAvgPool2d(1) (or "
        "F.adaptive_avg_pool2d(x, 1)) then flatten computes it as one average pool (32 "
        f"channels of 16x16: {before:,} -> {after:,} cycles)."
    )


RULES = (_depthwise_multiplier, _mean)


def known_rewrite(layer: LayerProfile) -> str | None:
    """The rewrite that avoids this layer's explosion, or None when etk knows none."""
    return next((text for text in (rule(layer) for rule in RULES) if text), None)
