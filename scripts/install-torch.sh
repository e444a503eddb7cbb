#!/usr/bin/env bash
# Installs PyTorch's CPU build into the Python that python3 runs, from PyTorch's wheel
# index; where that index cannot be reached (a machine that reaches only PyPI or a
# mirror), from the package index under the plain name, whose Linux wheel is the CUDA
# build. Run by demo.sh and test.sh.
set -euo pipefail
version="2.13.0"
if ! python3 -m pip install -q --index-url https://download.pytorch.org/whl/cpu \
    --timeout 5 --retries 0 "torch==$version"; then
    echo "PyTorch's CPU wheel index cannot be reached: installing torch==$version" \
        "from the package index" >&2
    python3 -m pip install -q "torch==$version"
fi
