"""What BOSaddle is given: Sella's ``order=1`` taken and any other order refused, a
position that is not finite or two atoms on one another refused before any call, an
isomer's restart file refused, and a calculator's NaN leaving a restart file that the
same command resumes from without repeating a call."""

from pathlib import Path

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT

from asebo.benchmarks.ts import guess
from asebo.optimize.observations import RestartError
from asebo.saddle import BOSaddle
from calculators import CountingCalculator, get_calculator

pytest.importorskip("sella")


def counted_water():
    atoms = molecule("H2O")
    atoms.calc = CountingCalculator(EMT())
    return atoms


def test_sellas_order_keyword_is_taken():
    assert BOSaddle(counted_water(), order=1, logfile=None).run(fmax=0.05, steps=0) is False


@pytest.mark.parametrize("order", [0, 2, 1.0, "1", True, None])
def test_any_other_order_is_refused_before_any_call(order):
    atoms = counted_water()
    with pytest.raises(ValueError, match=r"first-order saddle points only \(order=1\)"):
        BOSaddle(atoms, order=order, logfile=None)
    assert atoms.calc.ncalls == 0


def not_finite():
    atoms = counted_water()
    atoms.positions[1, 2] = np.nan
    return atoms


def on_one_another():
    atoms = counted_water()
    atoms.positions[2] = atoms.positions[1] + 0.05
    return atoms


@pytest.mark.parametrize(
    "build, message",
    [(not_finite, "atom 1 has a position that is not a finite number"), (on_one_another, "closer")],
)
def test_positions_no_calculator_can_take_are_refused_before_any_call(build, message):
    atoms = build()
    with pytest.raises(ValueError, match=message):
        BOSaddle(atoms, logfile=None)
    assert atoms.calc.ncalls == 0


def ethanol():
    atoms = molecule("CH3CH2OH")
    atoms.calc = CountingCalculator(EMT())
    return atoms


def dimethyl_ether():
    """Dimethyl ether with ethanol's atomic numbers in ethanol's order (C, C, O, H...)."""
    ether = molecule("CH3OCH3")
    atoms = ether[[0, 2, 1, *range(3, 9)]]
    atoms.calc = CountingCalculator(EMT())
    return atoms


def test_an_isomers_restart_file_is_refused_before_any_call(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = {"restart": "ether.json", "trajectory": "ether.traj"}
    with BOSaddle(dimethyl_ether(), logfile=None, **files) as search:
        search.run(fmax=0.05, steps=1)
    frames = Path("ether.traj").read_bytes()
    atoms = ethanol()
    assert (atoms.numbers == dimethyl_ether().numbers).all()
    with pytest.raises(RestartError, match="another start"):
        BOSaddle(atoms, logfile=None, **files)
    assert atoms.calc.ncalls == 0
    assert Path("ether.traj").read_bytes() == frames  # the refused run removed nothing
    ether = dimethyl_ether()  # the same start resumes
    with BOSaddle(ether, restart="ether.json", logfile=None) as search:
        search.run(fmax=0.05, steps=1)
    assert len(search.observations) == 2 + ether.calc.ncalls  # none repeated


class NaNAt(Calculator):
    """GFN2-xTB whose ``at``-th call returns NaN forces; its calls counted."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, at):
        super().__init__()
        self.calc, self.at, self.ncalls = get_calculator("gfn2"), at, 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.ncalls += 1
        self.calc.calculate(self.atoms, properties, system_changes)
        self.results = dict(self.calc.results)
        if self.ncalls == self.at:
            self.results["forces"] = np.full_like(self.results["forces"], np.nan)


def hcn(calc):
    atoms = guess("01_hcn")
    atoms.calc = calc
    return atoms


def test_a_nan_leaves_every_earlier_call_in_the_restart_file_and_the_run_resumes(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    whole = hcn(CountingCalculator(get_calculator("gfn2")))
    assert BOSaddle(whole, logfile=None).run(fmax=0.05)
    failing = hcn(NaNAt(4))
    with BOSaddle(failing, restart="saddle.json", logfile=None) as search:
        with pytest.raises(
            FloatingPointError, match="NaN or inf .* the 3 earlier observations are kept"
        ):
            search.run(fmax=0.05)
        nan_at = failing.positions.copy()
    resumed = hcn(CountingCalculator(get_calculator("gfn2")))
    with BOSaddle(resumed, restart="saddle.json", logfile=None) as search:
        assert len(search.observations) == 3
        np.testing.assert_array_equal(resumed.positions, nan_at)  # the call to make again
        assert search.run(fmax=0.05)
        computed = np.array(search.observations.positions)
    assert 3 + resumed.calc.ncalls == whole.calc.ncalls  # no call repeated but the NaN
    np.testing.assert_allclose(resumed.positions, whole.positions, atol=1e-3)
    gaps = np.abs(computed[:, None] - computed[None]).max(axis=(2, 3))
    assert np.all(gaps[np.triu_indices(len(computed), 1)] > 1e-6)
