#include "linked.cuh"
__global__ void linked_direct_kernel(int* x) { x[threadIdx.x] = linked_value() + 1; }
void linked_direct_launch(int* x) { linked_direct_kernel<<<1, 32>>>(x); }
