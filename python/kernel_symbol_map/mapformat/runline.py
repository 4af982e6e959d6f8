"""A recording's run line: the one line of a JSON Lines recording that names no test.

The pytest plugin writes it first, ``{"run": {"exit_status", "tests_collected",
"collection_errors"}}``, when its run failed to collect a file, ended with one of
:data:`ENDED`'s statuses or recorded no test; ``select`` reads it and warns.
Declared here, where the recorder that writes it and the consumer that reads it
both look.
"""

from __future__ import annotations

COUNTS = ("exit_status", "tests_collected", "collection_errors")  # its fields, each a whole number
# pytest's exit statuses of a run that did not get through its tests, and what each says
ENDED = {2: "was interrupted", 3: "stopped on an internal error", 4: "was given a wrong command line",
         5: "collected no tests"}
