// Kernels that read a texture object and write a surface object, taken as kernel arguments.
#include <cuda_runtime.h>
__global__ void tex_read(cudaTextureObject_t t, float* out) {
  out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x) * 2.0f;
}
__global__ void surf_write(cudaSurfaceObject_t s) {
  surf1Dwrite(float(threadIdx.x), s, threadIdx.x * sizeof(float));
}
void texture_launch(cudaTextureObject_t t, cudaSurfaceObject_t s, float* out) {
  tex_read<<<1, 32>>>(t, out);
  surf_write<<<1, 32>>>(s);
}
