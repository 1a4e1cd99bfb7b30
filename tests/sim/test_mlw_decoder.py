"""Vela's mlw weight decoder runs in a child process (toolkit/sim/families/ethos_u55/
mlw_decoder.py): its C exit(1) on a corrupt stream becomes a PayloadError naming what it printed,
never the end of etk, and the next stream decodes in a new child."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu import mlw_codec

from toolkit.sim.errors import PayloadError
from toolkit.sim.families.ethos_u55.mlw_decoder import mlw_decode


def test_a_stream_decodes_to_what_vela_encoded():
    values = np.random.default_rng(0).integers(-255, 256, 5000).tolist()
    assert mlw_decode(bytes(mlw_codec.encode(values))).tolist() == values
    assert mlw_decode(bytes(mlw_codec.encode(values))).tolist() == mlw_codec.decode(
        mlw_codec.encode(values)
    )


def test_a_corrupt_stream_is_a_payload_error_and_the_next_one_decodes():
    good = bytes(mlw_codec.encode([1, -2, 3, 4] * 10))
    with pytest.raises(PayloadError) as caught:
        mlw_decode(bytes(64))  # zeros: the decoder runs past the end and calls exit(1)
    assert str(caught.value) == (
        "a weight stream of 64 bytes is corrupt: Vela's mlw decoder stopped: "
        "bitbuf_getbit: underrun, bit_pos   0 byte_pos  64 buf_size  64"
    )
    assert mlw_decode(good).tolist() == [1, -2, 3, 4] * 10
