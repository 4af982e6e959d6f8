"""Build-time generator: a kernel per OP(name, value) of ops.def, and a header with their count."""
import pathlib
import re
import sys

ops = re.findall(r"OP\((\w+), (\d+)\)", pathlib.Path(sys.argv[1]).read_text())
out = pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
(out / "gen_ops.cu").write_text("".join(f"__global__ void gen_{n}(float* x) {{ x[threadIdx.x] += {v}; }}\n"
                                        for n, v in ops))
(out / "gen_ops.h").write_text(f"#pragma once\n#define GEN_OPS {len(ops)}\n")
