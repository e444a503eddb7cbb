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

from asebo.benchmarks.hop_saddles import (
    FLAT,
    HOPS,
    direction_of_hop,
    free_curvatures,
    hop_guess,
)
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


def test_the_start_mode_is_probed_by_calls_kept_as_observations():
    # At the IDPP midpoint of Au's hop on Al(100) the pair springs alone leave the
    # curvature along the hop unknown; the probe calls measure it, and the search
    # ends at the hop's saddle point
    initial, final = HOPS["au_al100"]()
    guess = hop_guess(initial, final)
    guess.calc = EMT()
    search = BOSaddle(guess, logfile=None)
    assert search.run(fmax=0.05, steps=40)
    assert (free_curvatures(guess, EMT()) < FLAT).sum() == 1
    barrier = guess.get_potential_energy() - initial.get_potential_energy()
    assert barrier == pytest.approx(climbing_image_barrier(initial, final), abs=0.01)
    state = search.observations.state
    probed = [np.asarray(mode) for mode in state["probed"]]
    assert state["mode_tested"] and 1 <= len(probed) <= search.settings.mode_probes
    # the mode probed last is the hop's: mostly the adatom along it
    assert abs(np.vdot(probed[-1], direction_of_hop(initial, final))) > 0.7
    # each probe was a call, kept as an observation, a probe_length from the start
    start = np.asarray(state["start"])
    for mode in probed:
        moved = start + search.settings.probe_length * mode / np.linalg.norm(mode, axis=1).max()
        assert search.observations.find(moved) is not None


def test_a_prior_calculator_climbs_its_own_lowest_mode_untested():
    initial, final = HOPS["pt_pt111"]()
    guess = hop_guess(initial, final)
    guess.calc = EMT()
    search = BOSaddle(guess, logfile=None, prior=EMT())
    search.run(fmax=0.05, steps=5)
    assert "probed" not in search.observations.state


def test_the_trust_radius_judges_the_error_on_the_atoms_the_walk_moves():
    """Forces predicted exactly on the free atoms and wrongly on the held ones (which a
    walk never moves): the radius grows as after a good prediction, as the band's does."""
    initial, final = HOPS["au_al100"]()
    guess = hop_guess(initial, final)
    guess.calc = EMT()
    search = BOSaddle(guess, logfile=None)
    forces = guess.get_forces()  # (n, 3), zero on the held atoms
    free = free_atoms(guess)
    predicted = np.where(free, forces, 5.0)  # eV/Å: far off on the held atoms only
    search._predicted = (guess.positions.copy(), predicted, True)
    before = search.trust_radius
    search._adapt_trust_radius(guess.positions, forces)
    assert search.trust_radius == pytest.approx(min(2 * before, search.settings.max_trust_radius))
    search._predicted = (guess.positions.copy(), predicted + np.where(free, 5.0, 0.0), True)
    search._adapt_trust_radius(guess.positions, forces)  # far off on the free atoms too
    assert search.trust_radius == pytest.approx(before)  # halved back


def test_a_saddle_point_from_a_band_is_first_order_where_a_second_curvature_is_in_doubt():
    # Au on Al(100), BONEB's climbing band, then the saddle search from it to a tighter
    # fmax: the model there has a second negative curvature of -0.002 eV/Å², nothing
    # along it computed and its posterior deviation 0.6 eV/Å²; the search ended False,
    # "higher order", at EMT's first-order saddle point
    from asebo import BONEB

    initial, final = HOPS["au_al100"]()
    images = [initial] + [initial.copy() for _ in range(3)] + [final]
    for image in images[1:-1]:
        image.calc = EMT()
    band = NEB(images, climb=True, method="improvedtangent")
    band.interpolate("idpp", apply_constraint=False)
    optimizer = BONEB(band, logfile=None)
    assert optimizer.run(fmax=0.05)
    search = BOSaddle.from_band(optimizer, logfile=None)
    assert search.run(fmax=0.01)
    assert search.result.order == 1
    saddle = search.atoms
    assert np.linalg.norm(saddle.get_forces() * free_atoms(saddle), axis=1).max() < 0.01
    assert (free_curvatures(saddle, EMT()) < FLAT).sum() == 1


def test_a_slab_built_without_vacuum_takes_its_saddle_point_as_with_vacuum():
    # fcc100 without vacuum has no third cell vector; the search for a map of the
    # crystal inverted the cell and raised numpy's LinAlgError (ASE's NEB takes it)
    from ase.build import add_adsorbate, fcc100
    from ase.constraints import FixAtoms

    def hop(vacuum):
        initial = fcc100("Al", size=(2, 2, 3))
        add_adsorbate(initial, "Au", 1.7, "hollow")
        if vacuum:
            initial.center(axis=2, vacuum=vacuum)
        initial.set_constraint(FixAtoms(mask=[atom.tag > 1 for atom in initial]))
        final = initial.copy()
        final[-1].x += final.cell[0, 0] / 2
        for end in (initial, final):
            end.calc = EMT()
            BFGS(end, logfile=None).run(fmax=0.01)
        guess = hop_guess(initial, final)
        guess.calc = EMT()
        assert BOSaddle(guess, logfile=None).run(fmax=0.05, steps=60)
        return guess.get_potential_energy() - initial.get_potential_energy()

    assert hop(None) == pytest.approx(hop(4.0), abs=2e-3)
