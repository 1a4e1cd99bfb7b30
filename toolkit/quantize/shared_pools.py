"""Pools keep the quantization of their input.

ExecuTorch 1.5.1 lowers a quantized avg_pool2d to a TOSA AVG_POOL2D with no RESCALE, as if its
output had its input's scale. Its quantizer's support table, though, gives pools an output
observer of their own; after a fused conv + ReLU block the pooled values span a smaller range,
the two scales differ, and every value after the pool is off by their ratio (measured: SQNR 3 dB
instead of 37 dB on conv + ReLU + global average pool, fused). So pools are taken out of the
pattern table (quantizer.support_table) and annotated here with the output shared with the input,
which is what the lowering assumes. Output range never exceeds input range for these pools.
"""

from __future__ import annotations

import torch
from executorch.backends.arm.quantizer.arm_quantizer_utils import (
    _mark_node_as_quantized,  # upstream's way to annotate so its partitioner sees "quantized"
    is_annotated,
)
from executorch.backends.cortex_m.quantizer_reporter import (
    QuantizerInfo,
    QuantizerReporterUser,
)
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import Quantizer, SharedQuantizationSpec

aten = torch.ops.aten
POOLS = {aten.avg_pool2d.default, aten.max_pool2d.default, aten.adaptive_avg_pool2d.default}


class SharedPoolQuantizer(Quantizer, QuantizerReporterUser):
    def __init__(self, config):
        super().__init__()
        QuantizerReporterUser.__init__(self)
        self.config = config

    def get_quantizer_info(self) -> QuantizerInfo:
        return QuantizerInfo(type(self).__name__, "avg/max pools", "input's qparams",
                             f"{__name__}.POOLS")

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.target not in POOLS or is_annotated(node):
                continue
            producer = node.args[0]
            if not isinstance(producer, Node):
                continue
            _mark_node_as_quantized(node, {producer: self.config.get_input_act_qspec()},
                                    SharedQuantizationSpec((producer, node)), is_quantized=True)
            self.report_accept([node])
        return model

    def validate(self, model: GraphModule) -> None:
        pass
