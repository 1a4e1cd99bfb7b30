"""ethos-u-toolkit: PyTorch models on Arm Ethos-U NPUs, fused vs unfused.

The Python API (toolkit/api.py): toolkit.compile, toolkit.compare and toolkit.deploy take what the
etk verbs take, or a live torch.nn.Module with example_inputs. They are loaded on first use, so
`import toolkit` stays light (the CLI imports it before it knows whether torch is needed).
"""

from typing import Any

from .errors import ToolError, UserError

__version__ = "0.1.0"
__all__ = ["ToolError", "UserError", "__version__", "compare", "compile", "deploy"]

_API = ("compile", "compare", "deploy")


def __getattr__(name: str) -> Any:
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'toolkit' has no attribute '{name}'")
