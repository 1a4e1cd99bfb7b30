"""Where a plan's runs happen: memory of the sizes the plan uses, the program's inputs and
outputs checked once to lie in it, kept from one run for the next.

A small program's run took longer to set up (a fresh Memory, every input's and output's checks)
than to simulate. A finished run's memory is taken back and made as new for the next: scratch
and SHRAM zeroed, the weights copied again where the program writes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import SimError
from .families.accelerator_config import Accelerator
from .memory import Memory
from .payload import IOTensor, NpuProgram

_KEPT = 2  # finished runs' memories kept (two runs at once on one plan, from two threads)


def _check_placed(tensors: Sequence[IOTensor], memory: Memory, what: str) -> None:
    """Refuse a tensor whose bytes lie outside its region (Memory.check's message)."""
    for number, t in enumerate(tensors):
        memory.check(t.region, t.offset, t.offset + t.nbytes, f"{what} {number}")


class RunFrame:
    """Memory for the runs of one program under one plan: regions the size the plan uses
    (extent: per region, its bytes in use; None for the payload's full sizes), region 0 shared
    and read-only when no operation writes it (constant_regions)."""

    def __init__(
        self,
        program: NpuProgram,
        accelerator: Accelerator,
        extent: dict[int, int] | None,
        constant_regions: frozenset[int],
    ):
        self.program = program
        self._weights = np.frombuffer(program.weights, dtype=np.uint8)
        self._shared_weights = 0 in constant_regions
        scratch, fast = program.scratch_size, program.scratch_fast_size
        if extent is not None:  # what the program uses: the 1 MiB fast scratch is mostly unused
            scratch, fast = min(scratch, extent.get(1, 0)), min(fast, extent.get(2, 0))
            if program.fast_scratch_aliases_scratch:
                scratch = max(scratch, fast)
        self._sizes = scratch, fast
        # the NPU's own buffers that operations address as regions (U85's chaining buffers)
        self._internal = {
            region: (extent or {}).get(region, size)
            for region, size in accelerator.family.internal_regions(accelerator).items()
            if extent is None or region in extent
        }
        self._shram = accelerator.shram_bytes
        first = self._new()
        _check_placed(program.inputs, first, "input")
        _check_placed(program.outputs, first, "output")
        self._kept = [first]

    def _new(self) -> Memory:
        scratch, fast = self._sizes
        regions = {
            0: self._weights if self._shared_weights else self._weights.copy(),
            1: np.zeros(scratch, np.uint8),
        }
        if self.program.fast_scratch_aliases_scratch:
            regions[2] = regions[1]
        elif fast:  # none where the plan's extent says nothing uses it
            regions[2] = np.zeros(fast, np.uint8)
        for region, size in self._internal.items():
            regions[region] = np.zeros(size, np.uint8)
        return Memory(regions, self._shram)

    def memory(self) -> Memory:
        """Memory as the program finds it at the start of a run."""
        try:
            memory = self._kept.pop()
        except IndexError:
            return self._new()
        return memory

    def release(self, memory: Memory) -> None:
        """Take a finished run's memory back, made as new for the next run (nothing may use it
        after this)."""
        if len(self._kept) >= _KEPT:
            return
        for number, buffer in memory.regions.items():
            if number == 0:
                if not self._shared_weights:
                    np.copyto(buffer, self._weights)
            elif number == 1 or buffer is not memory.regions[1]:
                buffer.fill(0)
        memory.zero_internal()
        self._kept.append(memory)

    def place_inputs(self, memory: Memory, inputs: Sequence[np.ndarray]) -> None:
        tensors = self.program.inputs
        if len(inputs) != len(tensors):
            raise SimError(f"{self.program.source} takes {len(tensors)} inputs, got {len(inputs)}")
        for i, (tensor, value) in enumerate(zip(tensors, inputs)):
            value, dtype = np.asarray(value), tensor.dtype
            if value.size * dtype.itemsize != tensor.nbytes:
                raise SimError(
                    f"input {i} has shape {value.shape} ({value.size} elements); the "
                    f"program expects {tensor.squeezed_shape}"
                )
            if value.dtype != dtype:
                if value.dtype.kind not in "iu" or value.dtype.itemsize != dtype.itemsize:
                    raise SimError(
                        f"input {i} is {value.dtype}; the program expects {dtype} (quantize it "
                        "first)"
                    )
                value = value.astype(dtype)  # the other sign, or byte order
            start = tensor.offset
            region = memory.regions[tensor.region]
            region[start : start + tensor.nbytes] = value.reshape(-1).view(np.uint8)

    def read_outputs(self, memory: Memory) -> list[np.ndarray]:
        """Copies of the outputs."""
        return [
            memory.regions[t.region][t.offset : t.offset + t.nbytes]
            .view(t.dtype)
            .reshape(t.squeezed_shape)
            .copy()
            for t in self.program.outputs
        ]
