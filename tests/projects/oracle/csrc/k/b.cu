#include "template.cuh"
#include "pch_only.h"
#include "alias.cuh"
__global__ void b_kernel(float* x) { x[threadIdx.x] += real_offset() + pch_value(); }
void b_launch(float* x, double* y) { b_kernel<<<1, 32>>>(x); scale_kernel<double><<<1, 32>>>(y, 2.0); }
