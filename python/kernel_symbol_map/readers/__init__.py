"""Device-code readers: which kernels does this binary define?

ELF objects, ``ar`` archives, CUDA fatbins and cubins, HIP offload bundles and
clang's ``.llvm.offloading``, read natively (:mod:`.devicecode` is the entry
point), plus the ``cuobjdump`` backend and the cross-check between the two.
They know nothing of CMake, and import only :mod:`..errors` from outside.
"""
