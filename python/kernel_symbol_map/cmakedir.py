"""Where the CMake package lives, for ``python -m kernel_symbol_map --cmake-dir`` and ``--cmake-include``."""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import KernelSymbolMapError

CONFIG = "KernelSymbolMapConfig.cmake"
TOP_LEVEL_INCLUDE = "KernelSymbolMapTopLevelInclude.cmake"
RELATIVE = Path("share") / "cmake" / "KernelSymbolMap"


def cmake_dir() -> Path:
    """The folder holding KernelSymbolMapConfig.cmake (pass it as ``KernelSymbolMap_DIR``)."""
    here = Path(__file__).resolve().parent
    candidates = [here / RELATIVE]
    # An editable install keeps the Python files in the checkout and CMake's installed files in site-packages.
    candidates += [Path(entry) / "kernel_symbol_map" / RELATIVE for entry in sys.path if entry]
    candidates.append(here.parents[1] / "cmake")  # a source checkout
    for candidate in candidates:
        if (candidate / CONFIG).is_file():
            return candidate
    raise KernelSymbolMapError(f"{CONFIG} is not installed next to {here}; reinstall kernel-symbol-map")


def cmake_include() -> Path:
    """The file to name in ``CMAKE_PROJECT_TOP_LEVEL_INCLUDES``: maps a project without editing it."""
    return cmake_dir() / TOP_LEVEL_INCLUDE
