#include "gen_ops.h"
__global__ void uses_header(float* x) { x[0] = GEN_OPS; }
