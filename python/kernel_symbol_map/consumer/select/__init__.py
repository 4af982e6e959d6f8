"""Deciding tests: ``selection`` joins the maps, the recordings (``recordings``) and a change
(``changes``, from git). Each changed file is decided by one rule, in its own module: the map's reach,
``emitted`` (two builds' digests), ``hostscope`` (host code by the libraries and functions a test ran),
``jitkernels`` and ``runtimesources`` (kernels a JIT or a run-time compile made), ``pythonfiles``
(Python code by per-test coverage), ``perfile`` (each file the map does not clear) and ``rules`` (the
user's path rules). ``evaluation`` and ``junit`` check a selection against a CI run's results."""
