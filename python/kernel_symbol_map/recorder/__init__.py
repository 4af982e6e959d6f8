"""The recorder: which kernels each CI step or test launched, through CUPTI's Activity API.

:mod:`.process` records one interpreter (started by ``record``, by the
pytest plugin, or in any Python descendant by the ``.pth`` hook in
:mod:`.hook`); :mod:`.activity` is the CUPTI side (``cupti-python``, the
``record`` extra); :mod:`.spawns` watches every process a recorded one
starts, so that none is unseen, and :mod:`.tree` what they leave running
below the tests' process (a daemon that cleared its environment);
:mod:`.timeline` is the plugin's tests log, which tells which tests ran
while a child lived; :mod:`.parts` merges each process's part file into the
JSON Lines that ``select`` reads. It imports nothing of the consumer.
"""
