#!/usr/bin/env bash
# Installs asebo with its campaign extra and relaxes a few molecules with GFN2-xTB by
# BOOptimizer and ASE's L-BFGS, from perturbed starts, and prints the comparison table.
# Installs into the Python that python3 runs (the virtual environment's when one is active).
set -euo pipefail
cd "$(dirname "$0")/.."
# PyTorch before asebo, so that pip does not pull the GPU build: its CPU build, from
# PyTorch's wheel index where that can be reached; one already installed is kept
python3 -c "import torch" 2>/dev/null || scripts/install-torch.sh
python3 -m pip install -q -e '.[campaign]'
# 'asebo compare', run by the python3 that has just installed it
python3 -m asebo.cli compare --molecules H2O NH3 CH3OH --optimizers bo lbfgs --starts 3 \
    --noise 0.1 --calc gfn2 --fmax 0.05 --seed 0 --db demo.db "$@"
