"""The environment variables a recorded process reads: set by ``record`` and the pytest plugin, and
inherited by every process they start. Constants only: the ``.pth`` start-up hook (:mod:`.hook`)
imports this module in every interpreter."""

from __future__ import annotations

FOLDER_VARIABLE = "KERNEL_SYMBOL_MAP_RECORD"  # the parts folder; set by `record` and the plugin
SCOPE_VARIABLE = "KERNEL_SYMBOL_MAP_RECORD_SCOPE"  # what this process's kernels belong to
TESTS_VARIABLE = "KERNEL_SYMBOL_MAP_RECORD_TESTS"  # the plugin's tests log (see .timeline)
SPAWN_VARIABLE = "KERNEL_SYMBOL_MAP_RECORD_SPAWN"  # the expectation this process claims (see .spawns)
