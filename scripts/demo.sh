#!/usr/bin/env bash
# Installs asebo with its campaign extra and relaxes a few molecules with GFN2-xTB by
# BOOptimizer and ASE's L-BFGS, from perturbed starts, and prints the comparison table.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[campaign]'
asebo compare --molecules H2O NH3 CH3OH --optimizers bo lbfgs --starts 3 --noise 0.1 \
    --calc gfn2 --fmax 0.05 --seed 0 --db demo.db "$@"
