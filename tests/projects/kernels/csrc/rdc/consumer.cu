extern __global__ void rdc_child(int* p);
__global__ void rdc_parent(int* p) { rdc_child<<<1, 32>>>(p); }
void rdc_launch(int* p) { rdc_parent<<<1, 1>>>(p); }
