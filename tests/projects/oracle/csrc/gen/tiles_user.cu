#include "tiles.h"
__global__ void tiles_user(float* x) { x[threadIdx.x] *= TILE_SCALE; }
