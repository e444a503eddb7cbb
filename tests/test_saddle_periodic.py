"""BOSaddle on periodic systems: a slab with FixAtoms and a bulk vacancy, with EMT.

The guess is the middle of the IDPP band between two relaxed minima
(:func:`asebo.benchmarks.hop_saddles.hop_guess`); the end must have converged forces and
exactly one negative curvature of EMT's finite-difference Hessian in the free
coordinates (translations left out where no atom is held), at the hop's barrier, which
a climbing-image NEB of ASE with BFGS gives independently.
"""

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.mep import NEB
from ase.optimize import BFGS

from asebo.benchmarks.hop_saddles import FLAT, HOPS, free_curvatures, hop_guess
from asebo.optimize.subspace import free_atoms

pytest.importorskip("sella")

from asebo import BOSaddle  # noqa: E402


def climbing_image_barrier(initial, final):
    """The barrier (eV) of ASE's climbing-image NEB (5 images, IDPP, BFGS to 0.01 eV/Å)."""
    images = [initial] + [initial.copy() for _ in range(3)] + [final]
    for image in images[1:-1]:
        image.calc = EMT()
    band = NEB(images, climb=True, method="improvedtangent")
    band.interpolate("idpp")
    BFGS(band, logfile=None).run(fmax=0.01, steps=1000)
    return max(image.get_potential_energy() for image in images) - initial.get_potential_energy()


@pytest.mark.parametrize("hop", ["pt_pt111", "cu_vacancy"])
def test_a_hop_ends_at_its_first_order_saddle_point(hop):
    initial, final = HOPS[hop]()
    guess = hop_guess(initial, final)
    guess.calc = EMT()
    search = BOSaddle(guess, logfile=None)
    assert search.run(fmax=0.05, steps=60)
    assert search.result.order == 1
    forces = guess.get_forces() * free_atoms(guess)
    assert np.linalg.norm(forces, axis=1).max() < 0.05
    assert (free_curvatures(guess, EMT()) < FLAT).sum() == 1
    barrier = guess.get_potential_energy() - initial.get_potential_energy()
    assert barrier == pytest.approx(climbing_image_barrier(initial, final), abs=0.01)


def test_held_atoms_do_not_move_and_the_model_order_counts_no_rotation():
    initial, final = HOPS["pt_pt111"]()
    guess = hop_guess(initial, final)
    guess.calc = EMT()
    held = ~free_atoms(guess).all(axis=1)
    start = guess.positions.copy()
    search = BOSaddle(guess, logfile=None)
    search.run(fmax=0.05, steps=60)
    assert np.array_equal(guess.positions[held], start[held])
    assert search.rotations is False
    assert search.model_order() == 1
