"""The ML Embedded Evaluation Kit's model files (../shared/cycle-anchors), compiled here by Vela
5.1 with the kit's Vela ini, run on the simulator bit-exactly against TFLite's reference kernels.

Reference outputs: ai-edge-litert 2.3.0, OpResolverType.BUILTIN_REF, inputs
np.random.default_rng(seed).integers(-128, 128, input shape, dtype=np.int8).
"""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.lower.tflite import compile_tflite
from toolkit.npu import npu_config, vendor_npu_config
from toolkit.sim import load_payload, simulate

from .test_vela_tflite import ANCHORS, needs_anchors

KWS = {
    0: [-2, -23, -76, -73, -93, -71, -17, -60, -60, -50, -108, -14],
    1: [-62, -49, -41, -66, -68, -60, -26, -70, -37, -66, -99, -4],
}
# MobileNetV2's 1001 softmax outputs, seed 0: those that are not -128
MOBILENET_V2 = {
    311: -127,
    435: -127,
    491: -127,
    540: -112,
    600: -127,
    620: -120,
    645: -127,
    736: -127,
    742: -124,
    751: -127,
    795: -127,
    805: -127,
    825: -125,
    845: -127,
    880: -127,
    886: 34,
    893: -127,
    905: -127,
    912: -105,
    967: -127,
    972: -119,
}


def _compiled(name: str, out):
    npu = vendor_npu_config(
        npu_config("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
        ANCHORS / "configs" / "mlek_default_vela_2021-12.ini",
        "the MLEK anchors",
    )
    program = compile_tflite(ANCHORS / "models" / name, npu, out)
    return npu, load_payload(program.delegates[0].vela_npz_path)


def _run(npu, payload, shape, seed):
    x = np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)
    return (
        simulate(payload, [x], npu.accelerator, npu.system_config, npu.memory_mode, npu.config_ini)
        .outputs[0]
        .ravel()
    )


@needs_anchors
def test_kws_micronet_m_equals_tflite_reference(tmp_path):
    npu, payload = _compiled("kws_micronet_m.tflite", tmp_path)
    assert {seed: _run(npu, payload, (1, 49, 10, 1), seed).tolist() for seed in KWS} == KWS


@needs_anchors
@pytest.mark.slow
def test_mobilenet_v2_equals_tflite_reference(tmp_path):
    npu, payload = _compiled("mobilenet_v2_1.0_224_INT8.tflite", tmp_path)
    y = _run(npu, payload, (1, 224, 224, 3), 0)
    assert {int(k): int(y[k]) for k in np.nonzero(y != -128)[0]} == MOBILENET_V2
