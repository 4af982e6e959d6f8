"""The producer: joins the readers and the build-tree model, and writes maps.

:mod:`.extract` builds a map document; :mod:`.cache` keeps each object's
kernels between runs and the last run's fingerprint.
"""
