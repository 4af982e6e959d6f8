namespace {
__global__ void anon_kernel(int* x) { x[threadIdx.x] = 7; }
}
void anon_launch(int* x) { anon_kernel<<<1, 32>>>(x); }
