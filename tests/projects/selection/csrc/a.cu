#include <stdexcept>
#include "shared.cuh"
__global__ void a_kernel(float* x) { x[threadIdx.x] *= 2.0f; }
// Host code in a .cu file: a test can call it without launching a kernel of this file.
void a_check(int n) { if (n < 0) throw std::invalid_argument("n < 0"); }
void a_launch(float* x) { a_kernel<<<1, 32>>>(x); shared_kernel<float><<<1, 32>>>(x); }
