#include "shared_host.h"
#include "template.cuh"
__global__ void a_kernel(int* x) { x[threadIdx.x] = shared_host_value(); }
void a_launch(int* x, float* y) { a_kernel<<<1, 32>>>(x); scale_kernel<float><<<1, 32>>>(y, 2.0f); }
