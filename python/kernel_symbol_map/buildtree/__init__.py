"""The CMake build-tree model: which objects, from which sources and targets, with which deps?

:mod:`.model` joins the file-API reply (:mod:`.fileapi`), the exact (source,
object) pairs (:mod:`.compdb`, :mod:`.dependinfo`, :mod:`.pairing`) and the
header deps (:mod:`.ninjadeps`, :mod:`.makedeps`). It never reads device code.
"""
