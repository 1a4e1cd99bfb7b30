"""The shared engines: an operation's description (operations.py) planned into a step that runs it
on memory. They read descriptions only, never a register: what they run is the same for every
NPU family whose decoder describes its operations so."""

from __future__ import annotations

from .conv import prepare_conv
from .decoded import DecodedStreams
from .dma import prepare_dma
from .elementwise import prepare_elementwise
from .matmul import prepare_matmul
from .memory import Memory
from .operations import Convolution, Dma, Elementwise, MatMul, Operation, Pooling, Resize
from .pool import prepare_pool
from .records import Step
from .resize import prepare_resize


def prepare(op: Operation, memory: Memory, decoded: DecodedStreams) -> Step:
    """The operation's step, its feature maps, tables and streams checked against memory's
    regions (decoded: the plan's weight and scale streams, for convolutions and scaled pools)."""
    if isinstance(op, Convolution):
        return prepare_conv(op, memory, decoded)
    if isinstance(op, Pooling):
        return prepare_pool(op, memory, decoded)
    if isinstance(op, Elementwise):
        return prepare_elementwise(op, memory)
    if isinstance(op, Dma):
        return prepare_dma(op, memory)
    if isinstance(op, MatMul):
        return prepare_matmul(op, memory)
    if isinstance(op, Resize):
        return prepare_resize(op, memory)
    raise TypeError(f"no engine runs {type(op).__name__}")
