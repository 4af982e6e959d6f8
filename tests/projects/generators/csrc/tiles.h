#pragma once
// Read by tools/gen_marlin.py at configure time, and included by csrc/plain.cu.
#define TILE_SCALE 3
#define TILE(n)
TILE(64)
TILE(128)
