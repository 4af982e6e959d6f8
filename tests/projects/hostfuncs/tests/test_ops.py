"""Each test calls one entry point of libops.so (HOSTFUNCS_LIB), loaded when this module is imported."""

import ctypes
import os

OPS = ctypes.CDLL(os.environ["HOSTFUNCS_LIB"])
SCALE = "_Z12scale_kernelPfi"


def test_pipeline(launch):
    OPS.ops_pipeline(4)
    launch(SCALE)  # what CUPTI would see on a GPU


def test_pipeline_rejects():
    assert OPS.ops_pipeline(0) == -1


def test_scale(launch):
    OPS.ops_scale(4)
    launch(SCALE)


def test_version():
    assert OPS.ops_version() == 3


def test_loaded():
    assert OPS is not None
