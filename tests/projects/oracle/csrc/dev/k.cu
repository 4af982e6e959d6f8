extern __device__ int dev_scale(int x);
__global__ void dev_kernel(int* x) { x[threadIdx.x] = dev_scale(x[threadIdx.x]); }
void dev_launch(int* x) { dev_kernel<<<1, 32>>>(x); }
