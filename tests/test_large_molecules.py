"""A 100-atom relaxation: it converges, and its steps cost no more than the size allows."""

import time

import numpy as np
import pytest
from ase.io import read

from asebo.benchmarks import baker, large


@pytest.mark.slow
def test_a_hundred_atoms_converge_at_a_step_time_within_a_ratio_of_thirty_atoms():
    from asebo.benchmarks.steptime import step_times
    from calculators import get_calculator

    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        small = read(baker.DEFAULT_DIR / "29_menthone.xyz")  # 29 atoms
        big = read(large.DEFAULT_DIR / "dipalmitoyl_glycerol_methyl_ether.xyz")  # 111 atoms
        per_step = {}
        for name, atoms in (("small", small), ("big", big)):
            start = time.process_time()
            times = step_times(atoms, get_calculator("gfn2"), steps=100, fmax=0.05)
            assert len(times) < 100, f"{name} did not converge in 100 steps"
            assert time.process_time() - start > times.sum()  # the calculator is left out
            per_step[name] = times.mean()
    finally:
        torch.set_num_threads(threads)
    # 3.8 times the atoms: n^2 growth would make the steps 15 times dearer; the
    # structured products grow as n, and the ratio measured is about 3
    assert np.isfinite(per_step["big"]) and per_step["big"] < 6.0 * per_step["small"]
