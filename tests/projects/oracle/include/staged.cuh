#pragma once
__device__ inline int staged_value() { return 3; }
