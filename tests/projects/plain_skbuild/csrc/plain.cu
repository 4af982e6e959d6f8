#include "plain.h"
__global__ void plain_kernel(float* x) { x[threadIdx.x] += plain_step(); }
extern "C" void plain_launch(float* x) { plain_kernel<<<1, 32>>>(x); }
