"""Model files are loaded the way `python file.py` would run them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from toolkit.models.loader import load_model


def test_a_model_file_imports_a_module_next_to_it(tmp_path):
    (tmp_path / "blocks_for_etk_test.py").write_text(
        textwrap.dedent("""
        from torch import nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, padding=1)

            def forward(self, x):
                return self.conv(x).relu()
        """)
    )
    (tmp_path / "net.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn
        from blocks_for_etk_test import Block

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()

            def forward(self, x):
                return self.block(x)

        def example_inputs():
            return (torch.zeros(1, 3, 8, 8),)
        """)
    )
    model = load_model(f"{tmp_path / 'net.py'}:Net")
    assert type(model.module.block).__name__ == "Block"
    assert tuple(model.module(torch.zeros(1, 3, 8, 8)).shape) == (1, 4, 8, 8)


def test_two_definitions_of_one_file_with_the_same_weights_hash_apart(tmp_path):
    """The compile cache keys on the hash: PoolHead subclasses DepthwiseMultiplier, has the same
    (seeded) weights and another forward; it got DepthwiseMultiplier's program."""
    nets = Path(__file__).parent.parent / "report" / "advice_nets.py"
    a, b = (load_model(f"{nets}:{name}") for name in ("depthwise_multiplier", "pool_head"))
    assert a.module.state_dict().keys() == b.module.state_dict().keys()
    assert all(
        torch.equal(a.module.state_dict()[k], b.module.state_dict()[k])
        for k in a.module.state_dict()
    )
    assert a.content_hash != b.content_hash
