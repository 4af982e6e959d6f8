#pragma once

int launch_scale(float* x, int n);  // b.cu: starts scale_kernel
int pipeline(float* x, int n);      // a.cu: checks its arguments, then launches through b.cu
int version();                      // host_only.cpp

// What the tests call, through ctypes.
extern "C" {
int ops_pipeline(int n);
int ops_scale(int n);
int ops_version();
}
