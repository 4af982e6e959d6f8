#include "linked/linked.cuh"
__global__ void linked_kernel(int* x) { x[threadIdx.x] = linked_value(); }
void linked_launch(int* x) { linked_kernel<<<1, 32>>>(x); }
