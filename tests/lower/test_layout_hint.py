"""Issue 18 item 4: with the NCHW interface the report and the terminal say how many edge
TRANSPOSEs --io-layout nhwc would remove, next to the NPU operation counts."""

from __future__ import annotations

import json

from toolkit.report.layout_hint import edge_transposes, layout_hint
from toolkit.report.tables import notes


def test_nchw_image_model_gets_the_nhwc_hint(compiled):
    result = compiled("zoo:conv2d_relu")
    programs = {name: v.program for name, v in result.variants.items()}
    # input and output transposes; unfused, the output one sits before the CLAMP
    assert {name: edge_transposes(p) for name, p in programs.items()} == {"fused": 2, "unfused": 2}
    hint = json.loads(result.report_path.read_text())["io_layout_hint"]
    assert hint["edge_transposes"] == {"fused": 2, "unfused": 2}
    assert hint["npu_ops"] == {name: p.npu_ops for name, p in programs.items()}
    fused_ops = programs["fused"].npu_ops
    assert hint["note"].startswith(
        f"--io-layout nhwc would remove 2 TRANSPOSE(s) at the NPU's "
        f"edges (fused: {fused_ops} NPU operations now"
    )
    assert hint["note"] in notes(result)
    assert layout_hint(programs, "nhwc", True) is None
    assert layout_hint(programs, "nchw", False) is None
