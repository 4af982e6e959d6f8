"""Which source file produced each GPU kernel.

The device-code reader is the foundation: :func:`read_kernels` lists the
kernel entry symbols of a CUDA or HIP binary without any toolkit.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .devicecode import Result, read_kernels
from .errors import FormatError, KernelSymbolMapError, ToolError

__all__ = [
    "FormatError",
    "KernelSymbolMapError",
    "Result",
    "ToolError",
    "__version__",
    "read_kernels",
]
