"""Build-time generator (issue 26, 1): one kernel per OP(name, value) line of ops.def."""
import pathlib
import re
import sys

ops = re.findall(r"OP\((\w+), (\d+)\)", pathlib.Path(sys.argv[1]).read_text())
out = pathlib.Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("".join(f"__global__ void gen_{n}(float* x) {{ x[threadIdx.x] += {v}; }}\n" for n, v in ops))
