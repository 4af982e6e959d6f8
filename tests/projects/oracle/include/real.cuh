#pragma once
__device__ inline float real_offset() { return 0.5f; }
