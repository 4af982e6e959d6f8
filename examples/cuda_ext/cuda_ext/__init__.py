"""An example CUDA extension; its wheel carries kernel_symbol_map.json.gz."""
