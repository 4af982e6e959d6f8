#pragma once
__global__ void fetched_kernel(int* p);
