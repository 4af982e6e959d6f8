"""Configure-time generator: one untracked file per TILE(n) of tiles.h, scaled by its TILE_SCALE."""
import pathlib
import re
import sys

text = pathlib.Path(sys.argv[1]).read_text()
scale = re.search(r"#define TILE_SCALE (\d+)", text).group(1)
out = pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for tile in re.findall(r"TILE\((\d+)\)", text):
    (out / f"marlin_{tile}.cu").write_text(
        f"__global__ void marlin_{tile}(float* x) {{ x[threadIdx.x] *= {tile} * {scale}; }}\n")
