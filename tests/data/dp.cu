extern __global__ void child(int* p);
__global__ void parent(int* p) { child<<<1, 1>>>(p); }
