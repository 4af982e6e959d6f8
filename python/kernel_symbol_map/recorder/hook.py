"""Start recording in every Python process that ``record`` (or the pytest plugin) spawns.

The wheel installs ``kernel_symbol_map_record.pth`` into site-packages; its one
line runs at every interpreter start and costs one environment lookup when
recording is off (coverage.py reaches subprocesses the same way). When
:data:`.environment.FOLDER_VARIABLE` is set, :func:`start` records this interpreter into
that folder. Forked children start their own part file. multiprocessing's
resource tracker (stdlib code, no user code, as long-lived as its parent) is
not recorded.
"""

from __future__ import annotations

import os

from .environment import FOLDER_VARIABLE, SCOPE_VARIABLE


def start() -> None:
    """Record this interpreter (from the .pth line); never raises, never prints on success."""
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        return
    try:
        from .process import ProcessRecorder
        from .spawns import resource_tracker, tracker_seen

        if resource_tracker():
            tracker_seen(folder)  # not recorded, and its audit record never ends before the merge: stdlib code
            return

        ProcessRecorder.start_current(folder, os.environ.get(SCOPE_VARIABLE, ""))
    except Exception as e:  # noqa: BLE001 - interpreter start-up must never fail because of us
        import sys

        print(f"kernel_symbol_map: cannot record this process: {e!r}", file=sys.stderr)
