"""Attribution pieces on their own: Vela's debug database, what added an operation, and the
fallback for a TOSA operator no FX node claimed."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.artifacts import LayerSource
from toolkit.lower.attribution import added_by, edge_transposes, operator_sources
from toolkit.lower.tosa_graph import TosaOperator, TosaProgram
from toolkit.lower.vela_debug_db import DebugDatabaseError, read_debug_db

# the tables and columns etk reads, as Vela 5.1 writes them (values from a real database:
# a 3x3 depthwise convolution with channel multiplier 2, lowered with transposes)
DATABASE = """<?xml version='1.0' encoding='UTF-8'?>
<debug source="out/delegate0">
<table name="perf">
<![CDATA[
"id","source_id","optimised_id","operator","name","staging_usage","op_cycles","npu_cycles","mac_count","shram_ac","Sram_ac","OffChipFlash_ac"
242,33,128,"DepthwiseConv2D","tosa_rescale_default_2",8192,5520,5520,36864,0,1920,304
264,33,128,"Transpose","#264",512,2048,1024,0,0,2048,0
]]>
</table>
<table name="queue">
<![CDATA[
"offset","cmdstream_id","optimised_id","scheduled_id"
984,1,128,242
1196,1,131,264
]]>
</table>
<table name="optimised">
<![CDATA[
"id","source_id","operator","kernel_w","kernel_h","ofm_w","ofm_h","ofm_d"
128,33,"DepthwiseConv2D",3,3,16,16,32
131,33,"DepthwiseConv2D",3,3,16,16,32
]]>
</table>
<table name="source">
<![CDATA[
"id","operator","kernel_w","kernel_h","ofm_w","ofm_h","ofm_d","ext_key"
33,"DepthwiseConv2D",3,3,16,16,32,33
]]>
</table>
</debug>
"""


def test_debug_database_maps_offsets_to_the_tosa_operator(tmp_path):
    path = tmp_path / "delegate0_debug.xml"
    path.write_text(DATABASE)
    db = read_debug_db(path)
    assert [(q.offset, q.optimised, q.scheduled) for q in db.queue] == [
        (984, 128, 242),
        (1196, 131, 264),
    ]
    assert db.optimised_source == {128: 33, 131: 33}
    assert db.source_operator == {33: ("DepthwiseConv2D", 33)}
    assert db.perf[242].macs == 36864 and db.perf[242].op_cycles == 5520
    assert db.perf[264].operator == "Transpose" and db.perf[264].name == "#264"
    assert db.perf[242].access_cycles == {"Sram": 1920, "OffChipFlash": 304}


@pytest.mark.parametrize(
    "text",
    ["", "<debug></debug>", DATABASE.replace('"ext_key"', '"key"'), DATABASE.replace("984,", "x,")],
)
def test_a_damaged_database_is_refused(tmp_path, text):
    path = tmp_path / "delegate0_debug.xml"
    path.write_text(text)
    with pytest.raises(DebugDatabaseError, match="delegate0_debug.xml"):
        read_debug_db(path)


CONV = LayerSource("features.0", "Conv2d", "conv2d", "conv2d_1", "model.py", 12)
PERMUTE = LayerSource("", "Net", "permute", "permute_1", "model.py", 20)
MEAN = LayerSource("", "Net", "mean", "mean_1", "model.py", 21)


@pytest.mark.parametrize(
    "operator, source, siblings, at_edge, layer, expected",
    [
        # the NCHW -> NHWC transpose ExecuTorch put in front of the first convolution
        ("Transpose", "Transpose", {"Transpose"}, True, CONV, "layout"),
        # the user's own permute of the model's input is not a layout change etk made
        ("Transpose", "Transpose", {"Transpose"}, True, PERMUTE, ""),
        ("Transpose", "Transpose", {"Transpose"}, False, PERMUTE, ""),
        # a depthwise convolution with channel multiplier 2: Vela's transposes around it
        ("Transpose", "DepthwiseConv2D", {"DepthwiseConv2D", "Transpose"}, False, CONV, "lowering"),
        ("DepthwiseConv2D", "DepthwiseConv2D", {"DepthwiseConv2D", "Transpose"}, False, CONV, ""),
        # a depthwise convolution over one channel runs as a Conv2D: nothing added
        ("Conv2D", "DepthwiseConv2D", {"Conv2D"}, False, CONV, ""),
        # REDUCE_SUM lowered with a transpose and a subtraction around its own reduce-sum
        ("Sub", "ReduceSum", {"Transpose", "ReduceSum", "Sub"}, False, MEAN, "lowering"),
        # RESIZE (nearest) running as one AvgPool with an upscaled IFM is the operator itself
        ("AvgPool", "Resize", {"AvgPool"}, False, MEAN, ""),
    ],
)
def test_what_added_an_operation(operator, source, siblings, at_edge, layer, expected):
    assert added_by(operator, source, siblings, at_edge, layer) == expected


def _graph(*ops: tuple[str, tuple[str, ...], tuple[str, ...]]) -> TosaProgram:
    return TosaProgram(
        tuple(TosaOperator(op, inputs, outputs) for op, inputs, outputs in ops),
        {"w": np.zeros(1)},
        {},
    )


def test_edge_transposes_are_those_at_a_graph_input_or_output():
    graph = _graph(
        ("TRANSPOSE", ("x",), ("t0",)),
        ("CONV2D", ("t0", "w"), ("c",)),
        ("TRANSPOSE", ("c",), ("t1",)),  # inner: read by the CLAMP, which is not the output
        ("CLAMP", ("t1",), ("r",)),
        ("CONV2D", ("r", "w"), ("c2",)),
        ("TRANSPOSE", ("c2",), ("t2",)),
        ("RESCALE", ("t2",), ("y",)),  # through a RESCALE to the graph's output
    )
    assert edge_transposes(graph) == {0, 5}


def test_an_operator_no_node_claimed_takes_its_readers_call():
    graph = _graph(
        ("TILE", ("x",), ("tiled",)),
        ("ADD", ("tiled", "x"), ("sum",)),
        ("RESHAPE", ("sum",), ("y",)),
    )
    sources = operator_sources(graph, {"sum": CONV})
    assert sources == [CONV, CONV, CONV]


def _frame(file: str, line: int) -> str:
    return f'  File "{file}", line {line}, in forward\n    x = ...\n'


def test_a_node_without_a_stack_trace_takes_the_nearest_users_line():
    """An attention's matmul comes out of a pass without a stack trace: it takes the line of
    the call that uses its result (keyword_transformer_block: `q @ k ... * scale` at line 70),
    before the lines of its inputs; frames of etk's own code are not the user's, the zoo's
    models are."""
    import torch
    from torch.fx import Graph

    from toolkit.graph_info import _TOOLKIT, _ZOO, nearby_line, node_layer

    graph = Graph()
    q = graph.placeholder("q")
    matmul = graph.call_function(torch.ops.aten.bmm.default, (q, q), name="bmm_default_1")
    scaled = graph.call_function(torch.ops.aten.mul.Tensor, (matmul, 0.25))
    graph.output(scaled)
    q.meta["stack_trace"] = _frame("/home/user/net.py", 69)
    scaled.meta["stack_trace"] = _frame("/home/user/net.py", 70)
    matmul.meta["stack_trace"] = _frame(f"{_TOOLKIT}/rewrites/sliced_matmul.py", 83)
    matmul.meta["torch_fn"] = ("bmm.default_1", "OpOverload.default")
    source = node_layer(matmul)
    assert (source.call, source.call_id, source.line) == ("bmm", "bmm.default_1", 0)
    scaled.meta["torch_fn"] = ("mul.Tensor_2", "OpOverload.Tensor")  # an overload's name: the op
    assert node_layer(scaled).call == "mul"
    assert nearby_line(matmul) == ("net.py", 70)
    del scaled.meta["stack_trace"]
    assert nearby_line(matmul) == ("net.py", 69)  # no user has a line: its inputs
    q.meta["stack_trace"] = _frame(f"{_ZOO}tiny.py", 32)
    assert nearby_line(matmul) == ("tiny.py", 32)


def test_a_node_without_a_module_is_the_call_it_was_made_for():
    """A GRU's decomposition adds CLAMPs with no module and no torch function: each is booked
    to the nearest call that has a module (a user first), so the GRU's layer holds them."""
    import torch
    from torch.fx import Graph

    from toolkit.graph_info import nearby_call, node_layer

    graph = Graph()
    x = graph.placeholder("x")
    gate = graph.call_function(torch.ops.aten.sigmoid.default, (x,))
    clamp = graph.call_function(torch.ops.aten.clamp.default, (gate, -1.0, 1.0))
    update = graph.call_function(torch.ops.aten.mul.Tensor, (clamp, x))
    graph.output(update)
    for node, fn in ((gate, "sigmoid_1"), (update, "mul_3")):
        node.meta["nn_module_stack"] = {"gru": ("gru", torch.nn.GRU)}
        node.meta["torch_fn"] = (fn, "builtin_function_or_method.mul")
    assert node_layer(clamp).module_type == ""
    assert nearby_call(clamp) is update
    assert (node_layer(update).module, node_layer(update).call_id) == ("gru", "mul_3")
    del update.meta["nn_module_stack"]
    assert nearby_call(clamp) is gate  # no user has a module: its inputs


def test_io_layout_nhwc_keeps_the_users_module_paths():
    """--io-layout nhwc wraps the model as its `model`: its layers are still `body.0`, its own
    calls still the model's, and the wrapper's permutes are the wrapper's."""
    import torch

    from toolkit.graph_info import node_layer
    from toolkit.models.layout import channels_last_io
    from toolkit.models.loader import load_model

    wrapped = channels_last_io(load_model("zoo:conv2d_relu"))
    graph = torch.export.export(wrapped.module, wrapped.example_inputs).graph
    layers = {n.name: node_layer(n).describe() for n in graph.nodes if n.op == "call_function"}
    assert layers == {
        "permute": "permute in ChannelsLastInterface.forward",  # etk's code: no user line
        "conv2d": "body.0 (Conv2d) at tiny.py:32",
        "relu": "body.1 (ReLU) at tiny.py:32",
        "permute_1": "permute in ChannelsLastInterface.forward",
    }
