"""The consumer: reads maps and kernel recordings, and selects tests.

It imports only :mod:`..mapformat` and :mod:`..errors` from the rest of the
package, so it works from a wheel's map alone: :mod:`.kernelmap` answers
"which kernels does this file reach" and "where did this kernel come from",
:mod:`.recordings` reads what a recorder wrote, :mod:`.selection` joins them.
"""
