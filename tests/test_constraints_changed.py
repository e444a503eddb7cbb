"""Constraints changed between a driver's construction and its run: each of BOOptimizer,
BONEB and BOSaddle built its coordinates, model and checks on the constraints it was
given, so a run under others is refused in one line before any call, and a new driver
on the same restart file goes on from the calls made; a saddle search asked for a
smaller fmax goes on where the larger one was met."""

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.mep import NEB

from asebo import BONEB, BOOptimizer
from asebo.benchmarks.neb import au_on_al100
from calculators import CountingCalculator, get_calculator

CHANGED = "the atoms' constraints changed since this {} was built on them"


@pytest.fixture(scope="module")
def au_al():
    initial, final, _ = au_on_al100()
    return initial, final


def held_two_layers(atoms):
    """The Au/Al(100) slab with its two lower layers held (ASE's tutorial holds one)."""
    atoms.set_constraint(FixAtoms(mask=atoms.positions[:, 2] < atoms.positions[:, 2].min() + 2.5))
    return atoms


def test_a_relaxation_under_constraints_changed_is_refused_and_a_new_one_goes_on(tmp_path):
    restart = str(tmp_path / "bo.json")
    cluster = Atoms("Cu4", positions=[[0, 0, 0], [2.4, 0, 0], [0, 2.5, 0], [0, 0, 2.6]])
    cluster.rattle(0.05, seed=1)
    cluster.set_constraint(FixAtoms([0]))
    cluster.calc = CountingCalculator(EMT())
    relaxation = BOOptimizer(cluster, restart=restart, logfile=None)
    relaxation.run(fmax=0.01, steps=2)
    made = cluster.calc.ncalls
    cluster.set_constraint()  # every atom free: the model's subspace held atom 0
    for run in (relaxation.run, lambda **limits: next(relaxation.irun(**limits))):
        with pytest.raises(ValueError, match=CHANGED.format("BOOptimizer")):
            run(fmax=0.01, steps=3)
    assert cluster.calc.ncalls == made
    relaxation.close()
    resumed = BOOptimizer(cluster, restart=restart, logfile=None)
    assert len(resumed.observations) == made
    assert resumed.run(fmax=0.01, steps=100)
    assert np.abs(cluster.get_forces()).max() < 0.01


def test_a_band_under_constraints_changed_is_refused_before_any_call(au_al):
    images = [au_al[0].copy() for _ in range(4)] + [au_al[1].copy()]
    for image in images:
        held_two_layers(image)
        image.calc = CountingCalculator(EMT())
    neb = NEB(images, climb=True, method="improvedtangent")
    neb.interpolate()
    band = BONEB(neb, logfile=None)
    for image in images:
        image.set_constraint(FixAtoms(mask=image.positions[:, 2] < image.positions[:, 2].min() + 1))
    with pytest.raises(ValueError, match=CHANGED.format("BONEB")):
        band.run(fmax=0.05, steps=3)
    assert sum(image.calc.ncalls for image in images) == 0


def test_a_band_aligned_rigidly_with_held_atoms_is_refused_before_any_call(au_al):
    images = [au_al[0].copy() for _ in range(3)] + [au_al[1].copy()]
    for image in images:
        image.calc = CountingCalculator(EMT())
    neb = NEB(images, remove_rotation_and_translation=True, method="improvedtangent")
    neb.interpolate()
    with pytest.raises(ValueError, match="remove_rotation_and_translation=False"):
        BONEB(neb, logfile=None)
    assert sum(image.calc.ncalls for image in images) == 0


def test_a_saddle_search_under_constraints_changed_is_refused_before_any_call(au_al):
    pytest.importorskip("sella")
    from asebo.saddle import BOSaddle

    guess = held_two_layers(au_al[0].copy())
    guess.positions[-1] = 0.5 * (au_al[0].positions[-1] + au_al[1].positions[-1])
    guess.calc = CountingCalculator(EMT())
    search = BOSaddle(guess, logfile=None)
    guess.set_constraint(FixAtoms(mask=guess.positions[:, 2] < guess.positions[:, 2].min() + 1))
    with pytest.raises(ValueError, match=CHANGED.format("BOSaddle")):
        search.run(fmax=0.05, steps=3)
    assert guess.calc.ncalls == 0


def test_a_saddle_search_asked_a_smaller_fmax_goes_on_to_it():
    # the verdict of the model's order at a configuration was kept across runs before
    # the forces were compared with the new fmax: the second run ended at once
    pytest.importorskip("sella")
    from asebo.saddle import BOSaddle

    hcn = Atoms("CNH", positions=[[0, 0, 0], [0, 0, 1.14838], [1.58536, 0, 1.14838]])
    hcn.calc = get_calculator("gfn2")
    search = BOSaddle(hcn, logfile=None)
    assert search.run(fmax=0.05)
    loose = np.linalg.norm(hcn.get_forces(), axis=1).max()
    assert search.run(fmax=0.1 * loose)
    assert np.linalg.norm(hcn.get_forces(), axis=1).max() < 0.1 * loose
