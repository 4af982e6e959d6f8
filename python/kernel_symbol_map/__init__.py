"""Which source file produced each GPU kernel.

The device-code reader is the foundation: :func:`read_kernels` lists the
kernel entry symbols of a CUDA or HIP binary without any toolkit;
:func:`load` opens a map for the consumer side. Both load lazily, so that the
command line's no-op path stays cheap.
"""

from __future__ import annotations

from ._version import __version__

TYPE_CHECKING = False  # typing's own flag, without importing typing (the CLI's start-up)

_LAZY = {
    "read_kernels": "readers.devicecode",
    "Result": "readers.devicecode",
    "load": "consumer.maps.kernelmap",
    "KernelMap": "consumer.maps.kernelmap",
    "FormatError": "errors",
    "KernelSymbolMapError": "errors",
    "ToolError": "errors",
}

if TYPE_CHECKING:  # the names below, for type checkers; at run time __getattr__ imports them
    from typing import Any

    from .consumer.maps.kernelmap import KernelMap, load  # noqa: F401
    from .errors import FormatError, KernelSymbolMapError, ToolError  # noqa: F401
    from .readers.devicecode import Result, read_kernels  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [*_LAZY, "__version__"]
