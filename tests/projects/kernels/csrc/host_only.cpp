#include "kernels/common.h"
int host_only_warp() { return kernels::kWarp; }
