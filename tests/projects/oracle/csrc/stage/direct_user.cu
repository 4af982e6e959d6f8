#include "staged.cuh"
__global__ void direct_kernel(int* x) { x[threadIdx.x] = staged_value() + 1; }
void direct_launch(int* x) { direct_kernel<<<1, 32>>>(x); }
