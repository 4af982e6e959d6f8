// Reads ops.def as an X-macro, so the map knows ops.def: the build-time generator reads it too.
#define OP(name, value) + value
__global__ void ops_total(float* x) { x[0] = 0
#include "ops.def"
  ; }
