#include <hip/hip_runtime.h>
__device__ int rdc_helper(int x) { return x * 2; }
__global__ void rdc_b_kernel(int* x) { x[threadIdx.x] = rdc_helper(1); }
void rdc_b(int* x) { rdc_b_kernel<<<1, 64>>>(x); }
