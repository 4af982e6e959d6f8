#include "kernels/shared_kernel.cuh"
#include "kernels/common.h"
namespace kernels {
__global__ void silu_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] / (1.0f + __expf(-in[i]));
}
void silu(float* out, const float* in, int n) {
  silu_kernel<<<n / kWarp + 1, kWarp>>>(out, in, n);
  scale_kernel<float><<<n / kWarp + 1, kWarp>>>(out, out, 2.0f, n);
}
}  // namespace kernels
