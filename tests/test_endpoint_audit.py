"""The endpoint audit: the target's Hessian and frequencies at an endpoint, and its table."""

import numpy as np
from ase import Atoms
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.optimize import BFGS
from ase.vibrations import VibrationsData

from asebo.benchmarks._endpoint_audit import (
    THRESHOLD,
    audit_section,
    finite_difference_hessian,
    frequencies,
    imaginary_modes,
    lowest_mode,
    mode_overlap,
)
from calculators import get_calculator


def relaxed(name):
    atoms = molecule(name)
    atoms.calc = get_calculator("gfn2")
    BFGS(atoms, logfile=None).run(fmax=1e-4)
    return atoms


def test_frequencies_match_ase_vibrations_and_drop_the_rigid_motions():
    water = relaxed("H2O")
    hessian = finite_difference_hessian(water, get_calculator("gfn2"))
    ours = frequencies(hessian, water)
    theirs = VibrationsData.from_2d(water, hessian).get_frequencies().real[-3:]
    assert len(ours) == 3  # 3n - 6
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)


def test_a_linear_molecule_keeps_four_modes_and_a_cell_three_less():
    co2 = relaxed("CO2")
    assert len(frequencies(finite_difference_hessian(co2, get_calculator("gfn2")), co2)) == 4
    copper = bulk("Cu", cubic=True)  # 4 atoms, periodic: translations only
    hessian = finite_difference_hessian(copper, EMT())
    found = frequencies(hessian, copper)
    assert len(found) == 9 and found.min() > 0.0


def test_a_planar_ammonia_is_a_saddle_and_the_pyramid_a_minimum():
    assert imaginary_modes(relaxed("NH3"), get_calculator("gfn2")) == []
    planar = molecule("NH3")
    planar.positions[:, 2] = 0.0
    planar.calc = get_calculator("gfn2")
    BFGS(planar, logfile=None).run(fmax=1e-3)  # stays planar: the forces keep the plane
    found = imaginary_modes(planar, get_calculator("gfn2"))
    assert len(found) == 1 and found[0] > THRESHOLD


def test_planar_ammonias_umbrella_is_its_lowest_mode_in_any_orientation():
    planar = molecule("NH3")
    planar.positions[:, 2] = 0.0
    planar.calc = get_calculator("gfn2")
    BFGS(planar, logfile=None).run(fmax=1e-3)
    mode = lowest_mode(finite_difference_hessian(planar, get_calculator("gfn2")), planar)
    # the umbrella: every atom along the plane's normal, the hydrogens against nitrogen
    assert np.abs(mode[:, :2]).max() < 1e-3
    assert np.sign(mode[0, 2]) != np.sign(mode[1, 2])
    turned = planar.copy()
    turned.rotate(70, "x")
    turned.rotate(30, "z")
    turned.translate([1.0, -2.0, 0.5])
    mode_turned = lowest_mode(finite_difference_hessian(turned, get_calculator("gfn2")), turned)
    assert mode_overlap(planar, mode, turned, mode_turned) > 0.999
    # a motion in the plane is orthogonal to it
    stretch = np.zeros_like(mode)
    stretch[1, :2] = planar.positions[1, :2] / np.linalg.norm(planar.positions[1, :2])
    assert mode_overlap(planar, mode, planar, stretch) < 1e-3


def test_hessian_is_the_closed_form_of_a_harmonic_pair():
    from ase.calculators.harmonic import SpringCalculator

    pair = Atoms("H2", positions=[[0, 0, 0], [0.9, 0, 0]])
    spring = SpringCalculator(pair.positions.copy(), k=3.0)  # each atom tied to its place
    np.testing.assert_allclose(finite_difference_hessian(pair, spring), 3.0 * np.eye(6), atol=1e-8)


def test_audit_section_counts_saddles_and_endpoints_against_lbfgs():
    results = {
        "A": {
            "lbfgs": {"energy": -1.0, "imaginary": []},
            "bo": {"energy": -1.05, "imaginary": []},
        },
        "B": {
            "lbfgs": {"energy": -1.0, "imaginary": []},
            "bo": {"energy": -0.9, "imaginary": [80.0, 216.0]},
        },
    }
    text = "\n".join(audit_section(results, ["bo", "lbfgs"]))
    assert "| **saddles** | 1 | 0 |" in text
    assert "| **above lbfgs** | 1 | - |" in text
    assert "| **below lbfgs** | 1 | - |" in text
    assert "- bo saddles: B (216i cm⁻¹)" in text
