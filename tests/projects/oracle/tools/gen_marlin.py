"""Configure-time generator (issue 26, 2; vLLM's marlin pattern): one file per tile of tiles.h, untracked."""
import pathlib
import re
import sys

text = pathlib.Path(sys.argv[1]).read_text()
scale = re.search(r"#define TILE_SCALE (\d+)", text).group(1)
out = pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for tile in re.findall(r"TILE\((\d+)\)", text):
    path = out / f"marlin_{tile}.cu"
    code = f"__global__ void marlin_{tile}(float* x) {{ x[threadIdx.x] *= {tile} * {scale}; }}\n"
    if not path.exists() or path.read_text() != code:  # as vLLM's generators do: unchanged files keep their time
        path.write_text(code)
