"""A package with a CUDA library and no idea that its build is mapped."""
