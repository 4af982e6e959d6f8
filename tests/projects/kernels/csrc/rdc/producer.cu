// Defines a kernel that consumer.cu launches from device code (needs -rdc).
__global__ void rdc_child(int* p) { p[threadIdx.x] *= 2; }
