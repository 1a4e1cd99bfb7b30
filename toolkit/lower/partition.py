"""Why the partitioner left a node on the CPU, captured from ExecuTorch's own reporter."""

from __future__ import annotations

import contextlib

from executorch.exir.backend.utils import WhyNoPartitionReporter

from .patching import patched


@contextlib.contextmanager
def capture_partition_rejections():
    """Collect {node name: reason} from every WhyNoPartitionReporter used inside the block.

    ExecuTorch logs these reasons at INFO level only; the report needs them per node.
    """
    rejections: dict[str, str] = {}
    original = WhyNoPartitionReporter.report_reject

    def report_reject(self, node, reason):
        rejections.setdefault(node.name, reason)
        return original(self, node, reason)

    with patched((WhyNoPartitionReporter, "report_reject", report_reject)):
        yield rejections
