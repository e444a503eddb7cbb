"""BOSaddle's own work (the fits, the walks on the model, the model's Hessian) runs on
the optimizer's threads, as BOOptimizer's does; the calculator keeps the caller's."""

import pytest
import torch
from ase.calculators.calculator import Calculator, all_changes

from asebo.benchmarks.ts import guess
from asebo.saddle import BOSaddle
from calculators import get_calculator

pytest.importorskip("sella")


class ThreadsSeen(Calculator):
    """GFN-xTB ``method`` that records PyTorch's threads at each calculation."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, method):
        super().__init__()
        self.calc, self.seen = get_calculator(method), []

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.seen.append(torch.get_num_threads())
        self.calc.calculate(self.atoms, properties, system_changes)
        self.results = dict(self.calc.results)


@pytest.mark.parametrize(
    "threads, environment, chosen", [(None, None, 1), (None, "2", 2), (2, "1", 2)]
)
def test_the_walk_runs_on_the_optimizers_threads_and_the_calculator_on_the_callers(
    monkeypatch, threads, environment, chosen
):
    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    atoms = guess("01_hcn")
    atoms.calc = ThreadsSeen("gfn2")
    prior = ThreadsSeen("gfn1")  # called only within the optimizer's work
    caller = 3
    before = torch.get_num_threads()
    torch.set_num_threads(caller)
    try:
        search = BOSaddle(atoms, logfile=None, prior=prior, threads=threads)
        assert search.threads == chosen
        assert search.run(fmax=0.05)
        assert torch.get_num_threads() == caller
    finally:
        torch.set_num_threads(before)
    assert set(atoms.calc.seen) == {caller}
    assert set(prior.seen) == {chosen}


@pytest.mark.parametrize("threads", [0, 1.5, True, "2"])
def test_threads_that_cannot_be_are_refused_before_any_call(threads):
    atoms = guess("01_hcn")
    atoms.calc = ThreadsSeen("gfn2")
    with pytest.raises(ValueError, match="threads must be a whole number >= 1"):
        BOSaddle(atoms, logfile=None, threads=threads)
    assert atoms.calc.seen == []
