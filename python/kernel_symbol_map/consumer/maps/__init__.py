"""Reading maps: ``kernelmap`` (load, query), ``inputs`` (a map, wheel or folder given on the command line),
``wheels`` (a wheel's members), ``names`` (kernels named for people), ``canonical`` (one spelling per file)
and ``config`` (``[tool.kernel-symbol-map]``)."""
