__global__ void flavour_kernel(int* x) { x[threadIdx.x] = KSM_FLAVOUR + 0; }
void flavour_launch(int* x) { flavour_kernel<<<1, 32>>>(x); }
