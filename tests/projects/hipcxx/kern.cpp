#include <hip/hip_runtime.h>
__global__ void cxx_kernel(float* x) { x[threadIdx.x] *= 3.0f; }
void cxx_launch(float* x) { hipLaunchKernelGGL(cxx_kernel, dim3(1), dim3(64), 0, 0, x); }
