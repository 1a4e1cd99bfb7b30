"""The compiler's heavy half, imported on a compile's first use: the quantizer (torchao) and
ExecuTorch's lowering. A run whose programs all come from the cache never imports them, which
saves seconds of every cached deploy; console_capture.quiet_torch_import(COMPILER_SIDE) imports
this module with their import-time chatter captured."""

from ..quantize.quantizer import export_module, quantize
from .executorch_lower import lower
from .upstream_speedups import upstream_speedups

__all__ = ["export_module", "lower", "quantize", "upstream_speedups"]
