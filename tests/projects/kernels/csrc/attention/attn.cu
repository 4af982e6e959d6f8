#include "kernels/shared_kernel.cuh"
namespace kernels {
__global__ void attention_kernel(float* out, const float* q, int n) {
  if (threadIdx.x < n) out[threadIdx.x] = q[threadIdx.x];
}
void attention(float* out, const float* q, int n) {
  attention_kernel<<<1, 64>>>(out, q, n);
  scale_kernel<float><<<1, 64>>>(out, out, 0.5f, n);
  scale_kernel<double><<<1, 64>>>(nullptr, nullptr, 1.0, 0);
}
}  // namespace kernels
