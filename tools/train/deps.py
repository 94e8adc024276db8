"""PyTorch for tools/train, installed on first use.

The training and reference scripts need Debian's python3-torch (CPU). It is not part of the
build/test/serve dependencies, so it is installed here, by the scripts that need it, through
`scripts/install-deps.sh --train` (apt; sudo when not root). Importing this module returns
only once `import torch` works; it exits with status 2 naming the command otherwise.
"""
import os
import subprocess
import sys


def _install():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = ["bash", os.path.join(root, "scripts", "install-deps.sh"), "--train"]
    print("tools/train: PyTorch is missing; running " + " ".join(cmd), file=sys.stderr)
    if subprocess.call(cmd) != 0:
        sys.exit("tools/train: installing PyTorch failed; run `scripts/install-deps.sh --train`")


try:
    import torch  # noqa: F401
except ImportError:
    _install()
    import importlib
    importlib.invalidate_caches()
    import torch  # noqa: F401
