#!/usr/bin/env python3
"""Write ONNX's backend node tests (model.onnx + test_data_set_0/*.pb per test) into OUT_DIR,
from the installed onnx package (Debian 12: python3-onnx 1.12).

    python3 tests/onnx_node/generate.py OUT_DIR

onnx 1.12's test cases use NumPy aliases that NumPy 1.24 removed (np.float, np.int, np.bool,
np.object, np.complex, np.str); they are restored here before the cases load, as the builtins
they always were. Exit status 77 (skipped) when onnx or numpy is not installed.
"""
import sys
import warnings

try:
    import numpy as np
except ImportError:
    print("skipped: python3-numpy is not installed", file=sys.stderr)
    sys.exit(77)

warnings.filterwarnings("ignore")
for alias, real in (("float", float), ("int", int), ("bool", bool), ("object", object),
                    ("complex", complex), ("str", str)):
    if alias not in np.__dict__:
        setattr(np, alias, real)

try:
    import onnx
    from onnx.backend.test.cmd_tools import main
except ImportError:
    print("skipped: python3-onnx is not installed", file=sys.stderr)
    sys.exit(77)

if len(sys.argv) != 2:
    print("usage: generate.py OUT_DIR", file=sys.stderr)
    sys.exit(2)
sys.argv = ["onnx-backend-test", "generate-data", "-o", sys.argv[1]]
main()
print(onnx.__version__)
