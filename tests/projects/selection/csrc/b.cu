#include "alias.cuh"  // a symlink to shared.cuh, made by the test
__global__ void b_kernel(int* x) { x[threadIdx.x] = 0; }
void b_launch(int* x) { b_kernel<<<1, 32>>>(x); shared_kernel<int><<<1, 32>>>(x); }
