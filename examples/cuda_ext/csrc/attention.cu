#include "common.cuh"

namespace demo {

template <int HEAD_DIM>
__global__ void attention_kernel(float* out, const float* q, int tokens) {
  int t = blockIdx.x;
  if (t < tokens) out[t * HEAD_DIM + threadIdx.x] = q[t * HEAD_DIM + threadIdx.x];
}

void attention(float* out, const float* q, int tokens, int head_dim) {
  if (head_dim == 64) attention_kernel<64><<<tokens, 64>>>(out, q, tokens);
  else attention_kernel<128><<<tokens, 128>>>(out, q, tokens);
  scale_kernel<float><<<tokens, 64>>>(out, out, 0.5f, tokens);
}

}  // namespace demo

// For Python (cuda_ext.attention, through ctypes).
extern "C" int cuda_ext_attention(int tokens, int head_dim) {
  float* buf = nullptr;
  if (cudaMalloc(&buf, 2 * tokens * head_dim * sizeof(float)) != cudaSuccess) return 1;
  demo::attention(buf, buf + tokens * head_dim, tokens, head_dim);
  cudaError_t err = cudaDeviceSynchronize();
  cudaFree(buf);
  return err == cudaSuccess ? 0 : 2;
}
