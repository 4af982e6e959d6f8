#include "staged/staged.cuh"
__global__ void staged_kernel(int* x) { x[threadIdx.x] = staged_value(); }
void staged_launch(int* x) { staged_kernel<<<1, 32>>>(x); }
