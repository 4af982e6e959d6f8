// Relocatable device code: dev_scale is linked into devconsumer's device-link object, where
// dev_kernel (csrc/dev/k.cu) calls it. dev_direct_kernel gives this object kernels of its own.
__device__ int dev_scale(int x) { return x * 2; }
__global__ void dev_direct_kernel(int* x) { x[threadIdx.x] = 1; }
