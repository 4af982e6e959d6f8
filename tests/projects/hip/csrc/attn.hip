#include "common.hpp"
__global__ void attn_kernel(float* x) { x[threadIdx.x] += 1.0f; }
void attn(float* x) { attn_kernel<<<1, 64>>>(x); scale_kernel<float><<<1, 64>>>(x, 0.5f); }
