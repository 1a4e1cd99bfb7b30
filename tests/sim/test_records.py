"""make_record: the OpRecord that OpRecord(**fields) makes, or the same refusal."""

from __future__ import annotations

import pickle

import pytest

from toolkit.sim.records import OpRecord, make_record

FIELDS = dict(
    kind="conv",
    offset=0x40,
    macs=1200,
    bytes_read=((1, 300), (0, 80)),
    bytes_written=((1, 96),),
    ofm_shape=(2, 3, 16),
    kernel=(3, 3, 1, 1, 1, 1),
    acc_40bit=True,
)


def test_made_records_equal_constructed_ones_field_for_field():
    made, built = make_record(**FIELDS), OpRecord(**FIELDS)
    assert made == built and vars(made) == vars(built)
    assert pickle.loads(pickle.dumps(made)) == built
    assert made.registers == {} and made.registers is not make_record(**FIELDS).registers
    with pytest.raises(AttributeError):
        made.macs = 1  # still frozen


def test_missing_and_unknown_fields_are_refused():
    partial = {k: v for k, v in FIELDS.items() if k != "macs"}
    with pytest.raises(TypeError, match=r"^OpRecord fields missing \['macs'\], unknown \[\]$"):
        make_record(**partial)
    with pytest.raises(TypeError, match=r"missing \[\], unknown \['mac'\]$"):
        make_record(**FIELDS, mac=3)
