"""Reporting sizes: ``sizeinputs`` measures what ``size`` is given, ``sizereport`` charges bytes to
sources, targets and kernels (duplicates, diffs, budgets), and ``treemap`` draws the picture."""
