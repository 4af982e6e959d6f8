#include "ops.h"

int pipeline(float* x, int n) {
  if (n <= 0) {
    return -1;  // an argument check: returns before any launch
  }
  return launch_scale(x, n);
}

extern "C" int ops_pipeline(int n) { return pipeline(nullptr, n); }
