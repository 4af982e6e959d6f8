#pragma once
namespace kernels { constexpr int kWarp = 32; }
