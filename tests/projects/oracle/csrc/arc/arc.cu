// A static archive of relocatable device code that two shared libraries (arc_a, arc_b) link: each
// device-links it, so its kernel is in both libraries' device code.
__global__ void arc_kernel(int* x) { x[threadIdx.x] = 15; }
void arc_launch(int* x) { arc_kernel<<<1, 32>>>(x); }
