#pragma once
__device__ inline int linked_value() { return 4; }
