"""The consumer: reads maps and kernel recordings, and answers with them. Three rooms, one per job:

- :mod:`.maps` reads maps and the inputs that hold them (a map file, a wheel, a folder), names
  kernels for people, and resolves paths to one spelling per file: ``kernelmap`` answers "which
  kernels does this file reach" and "where did this kernel come from";
- :mod:`.select` decides which tests a change needs: ``recordings`` reads what a recorder wrote,
  ``selection`` joins them with the maps, each rule of the decision in a module of its own, and
  ``evaluation`` checks a selection against a CI run's results;
- :mod:`.size` reports which sources and kernels make a binary big, and what made it grow.

:mod:`.select` and :mod:`.size` import :mod:`.maps`, never each other; from the rest of the package
the consumer imports only :mod:`..mapformat`, :mod:`..errors` and small shared modules, so it works
from a wheel's map alone.
"""
