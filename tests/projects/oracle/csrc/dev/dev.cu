// Relocatable device code: dev_scale is called by dev_direct_kernel here (a call a relocation
// resolves: __noinline__ keeps it out of line) and, through devconsumer's device link, by
// dev_kernel (csrc/dev/k.cu): a kernel calling a device function of another object.
__device__ __noinline__ int dev_scale(int x) { return x * 2; }
__global__ void dev_direct_kernel(int* x) { x[threadIdx.x] = dev_scale(x[threadIdx.x]); }
