"""transition_state: from two minima to a checked transition state.

On a closed-form surface (the Müller-Brown surface in two bond lengths of a bent
triatomic) the workflow ends at the surface's own saddle point, first order and joining
the two minima, computing no configuration twice; between two minima with a third
between them it says the saddle point it finds is not connected. On an EMT hop in a
periodic cell (the saddle search from the band's highest image) the finite-difference
Hessian and descents
with the calculator agree with the model's check. Bad input is refused before any call;
the ``asebo ts`` command runs end to end.
"""

import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT
from ase.io import read, write
from ase.optimize import BFGS

from asebo.barrier import transition_state
from asebo.barrier.connection import rmsd
from asebo.barrier.record import NOT_CONNECTED, VERIFIED
from asebo.benchmarks.neb import au_on_al100
from calculators.muller_brown import MINIMUM_A, MINIMUM_B, SADDLE_AB, muller_brown

MINIMUM_C = (0.623499, 0.028038)
"""The third minimum of the Müller-Brown surface, joined to B (not to A) by a saddle."""
OFFSETS = np.array([2.3, 1.3])  # Å: the bond lengths at the surface's origin
ANGLE = np.radians(100.0)  # the bend's rest angle
BEND = 2.0  # eV/rad², the bend's stiffness
SCALE = 0.01  # eV per unit of the surface


def bend(atoms):
    """The bend's energy and gradient (3, 3) at ``atoms`` (three atoms, the middle one
    the apex)."""
    a, b, c = atoms.positions
    u, v = a - b, c - b
    r1, r2 = np.linalg.norm(u), np.linalg.norm(v)
    cosine = u @ v / (r1 * r2)
    angle = np.arccos(np.clip(cosine, -1.0, 1.0))
    slope = -BEND * (angle - ANGLE) / np.sin(angle)  # dE/d(cosine)
    gradient = np.zeros((3, 3))
    gradient[0] = slope * (v / (r1 * r2) - cosine * u / r1**2)
    gradient[2] = slope * (u / (r1 * r2) - cosine * v / r2**2)
    gradient[1] = -gradient[0] - gradient[2]
    return 0.5 * BEND * (angle - ANGLE) ** 2, gradient


class BentMullerBrown(Calculator):
    """``SCALE`` times the Müller-Brown surface of the two bond lengths less
    :data:`OFFSETS`, plus a harmonic bend: its minima and saddle points are the
    surface's at the bend's rest angle."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, calls=None):
        super().__init__()
        self.calls = calls  # a list the positions of each call are added to

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if self.calls is not None:
            self.calls.append(self.atoms.positions.copy())
        a, b, c = self.atoms.positions
        lengths = np.array([np.linalg.norm(a - b), np.linalg.norm(c - b)])
        value, slope = muller_brown(lengths - OFFSETS)  # (), (2,)
        energy, gradient = bend(self.atoms)
        gradient[0] += SCALE * slope[0] * (a - b) / lengths[0]
        gradient[2] += SCALE * slope[1] * (c - b) / lengths[1]
        gradient[1] -= SCALE * (slope[0] * (a - b) / lengths[0] + slope[1] * (c - b) / lengths[1])
        energy += SCALE * value
        self.results = {"energy": energy, "free_energy": energy, "forces": -gradient}


class Bend(Calculator):
    """The bend alone: the part of the surface a cheaper method would know, the GP's
    prior, as GFN1-xTB is under GFN2-xTB."""

    implemented_properties = ("energy", "free_energy", "forces")

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        energy, gradient = bend(self.atoms)
        self.results = {"energy": energy, "free_energy": energy, "forces": -gradient}


def at(point):
    """The triatomic at the surface's ``point`` (2,), the bend at rest."""
    r1, r2 = np.asarray(point) + OFFSETS
    apex = [0.0, 0.0, 0.0]
    ends = [[r1, 0.0, 0.0], [r2 * np.cos(ANGLE), r2 * np.sin(ANGLE), 0.0]]
    return Atoms("H3", positions=[ends[0], apex, ends[1]])


def energy_at(point):
    atoms = at(point)
    atoms.calc = BentMullerBrown()
    return atoms.get_potential_energy()


def test_the_surface_forces_are_its_energy_gradient():
    atoms = at((-0.3, 0.9))
    atoms.rattle(0.1, seed=1)
    atoms.calc = BentMullerBrown()
    forces = atoms.get_forces()
    step = 1e-5
    for index in np.ndindex(3, 3):
        shifted = [atoms.copy(), atoms.copy()]
        for sign, probe in zip((1, -1), shifted):
            probe.positions[index] += sign * step
            probe.calc = BentMullerBrown()
        difference = shifted[0].get_potential_energy() - shifted[1].get_potential_energy()
        assert forces[index] == pytest.approx(-difference / (2 * step), abs=1e-6)


@pytest.fixture(scope="module")
def a_to_b():
    """The workflow from minimum A to minimum B: (result, positions of every call)."""
    pytest.importorskip("sella")
    calls = []
    result = transition_state(at(MINIMUM_A), at(MINIMUM_B), BentMullerBrown(calls), prior=Bend())
    return result, np.array(calls)


def test_two_minima_end_at_the_surfaces_saddle_point_first_order_and_connected(a_to_b):
    result, _ = a_to_b
    assert result.code == VERIFIED and result.verified
    assert result.first_order and result.connected
    assert result.route == "saddle search"
    assert rmsd(at(SADDLE_AB), result.atoms) < 0.01
    saddle = energy_at(SADDLE_AB)
    assert result.forward_barrier == pytest.approx(saddle - energy_at(MINIMUM_A), abs=2e-3)
    assert result.backward_barrier == pytest.approx(saddle - energy_at(MINIMUM_B), abs=2e-3)
    assert sorted(result.ends) == ["final", "initial"]


def test_an_endpoint_that_is_no_minimum_is_said_in_the_log(tmp_path):
    pytest.importorskip("sella")
    log = tmp_path / "ts.log"
    off = np.asarray(MINIMUM_A) + [0.05, -0.05]
    with pytest.warns(UserWarning, match="the initial endpoint's largest force is") as seen:
        transition_state(at(off), at(MINIMUM_B), BentMullerBrown(), prior=Bend(), logfile=str(log))
    assert len([w for w in seen if "endpoint's largest force" in str(w.message)]) == 1
    lines = [line for line in log.read_text().splitlines() if "endpoint's largest force" in line]
    expected = at(off)
    expected.calc = BentMullerBrown()
    largest = np.linalg.norm(expected.get_forces(), axis=1).max()
    assert len(lines) == 1 and f"the initial endpoint's largest force is {largest:.3f}" in lines[0]


def test_no_configuration_is_computed_twice_and_every_call_is_counted(a_to_b):
    result, calls = a_to_b
    assert result.total_calls == len(calls)
    assert result.calls["endpoints"] == 2
    apart = np.abs(calls[:, None] - calls[None]).max(axis=(2, 3))  # (m, m)
    assert (apart[np.triu_indices(len(calls), 1)] > 1e-8).all()


def test_the_models_imaginary_frequency_is_the_calculators(a_to_b):
    result, _ = a_to_b
    checked = transition_state(
        at(MINIMUM_A),
        at(MINIMUM_B),
        BentMullerBrown(),
        prior=Bend(),
        hessian="calculator",
        descent="calculator",
    )
    assert checked.verified
    assert checked.calls["check"] > 19  # the finite differences: 6 per atom and one
    # the model's curvature comes from the calls of a loose band: an estimate
    assert result.imaginary == pytest.approx(checked.imaginary, rel=0.15)


def test_a_saddle_point_that_leads_to_a_third_minimum_is_not_connected():
    pytest.importorskip("sella")
    # A and C are joined through B: the band's highest image sits at the saddle of A and B
    result = transition_state(at(MINIMUM_A), at(MINIMUM_C), BentMullerBrown(), prior=Bend())
    assert result.first_order
    assert not result.connected and result.code == NOT_CONNECTED
    assert rmsd(at(SADDLE_AB), result.atoms) < 0.01
    assert "initial" in result.ends and "final" not in result.ends
    assert "not connected" in result.reason


def test_the_same_call_again_with_its_restart_files_repeats_no_call_of_band_or_search(tmp_path):
    pytest.importorskip("sella")
    stem = str(tmp_path / "ts")
    first = transition_state(
        at(MINIMUM_A), at(MINIMUM_B), BentMullerBrown(), prior=Bend(), restart=stem
    )
    calls = []
    again = transition_state(
        at(MINIMUM_A), at(MINIMUM_B), BentMullerBrown(calls), prior=Bend(), restart=stem
    )
    assert first.verified and again.verified
    assert again.calls["endpoints"] == again.calls["band"] == again.calls["saddle"] == 0
    assert len(calls) == again.calls["check"]  # the check's calls are not kept
    np.testing.assert_allclose(again.atoms.positions, first.atoms.positions)


@pytest.fixture(scope="module")
def au_al():
    initial, final, _ = au_on_al100()
    return initial, final


class CountedEMT(EMT):
    """EMT whose calls are counted in the list ``calls``."""

    def __init__(self, calls):
        super().__init__()
        self.calls = calls

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        self.calls.append(atoms.positions.copy())
        super().calculate(atoms, properties, system_changes)


@pytest.fixture(scope="module")
def au_al_saddle(au_al):
    """The workflow on the Au/Al(100) hop, with its model's check: (result, calls)."""
    initial, final = au_al
    calls = []
    return transition_state(initial, final, CountedEMT(calls), n_images=3), calls


def test_an_emt_hop_ends_at_a_checked_transition_state(au_al, au_al_saddle):
    initial, final = au_al
    result, calls = au_al_saddle
    assert result.verified and result.route == "saddle search"
    assert result.total_calls == len(calls)
    assert len({positions.tobytes() for positions in calls}) == len(calls)  # none twice
    checked = transition_state(
        initial, final, EMT(), n_images=3, hessian="calculator", descent="calculator"
    )
    assert checked.verified
    assert checked.imaginary == pytest.approx(result.imaginary, rel=0.1)
    # the hop is symmetric: as high above the final minimum as above the initial one
    assert result.forward_barrier == pytest.approx(result.backward_barrier, abs=0.01)


def test_a_check_cut_short_by_its_steps_says_so_and_the_models_descent_takes_none(au_al):
    pytest.importorskip("sella")
    initial, final = au_al
    on_model = transition_state(initial, final, EMT(), n_images=3, steps=3)
    assert on_model.verified  # the descents on the model cost no call and no step
    short = transition_state(initial, final, EMT(), n_images=3, steps=3, descent="calculator")
    assert short.code == NOT_CONNECTED and short.ends == ("unfinished", "unfinished")
    assert "ran out of its steps before a minimum" in short.reason
    assert "ends elsewhere" not in short.reason


def test_rmsd_is_blind_to_rotation_translation_and_lattice_vectors(au_al):
    water = molecule("H2O")
    turned = water.copy()
    turned.rotate(40, "z")
    turned.translate([1.0, -2.0, 0.5])
    assert rmsd(water, turned) < 1e-8
    initial, _ = au_al
    shifted = initial.copy()
    shifted.positions[-1] += initial.cell[0]  # the adatom one cell along
    assert rmsd(initial, shifted) < 1e-8


def _refused(initial, final, **options):
    calls = []
    with pytest.raises((ValueError, TypeError)) as caught:
        transition_state(
            initial, final, options.pop("calculator", BentMullerBrown(calls)), **options
        )
    assert not calls
    return str(caught.value)


def test_what_no_band_can_take_is_refused_before_any_call():
    a, b = at(MINIMUM_A), at(MINIMUM_B)
    assert "one configuration" in _refused(a, a.copy())
    assert "other atoms" in _refused(a, Atoms("H2", positions=[[0, 0, 0], [0, 0, 1]]))
    assert "n_images" in _refused(a, b, n_images=0)
    assert "fmax" in _refused(a, b, fmax=-0.05)
    assert "hessian" in _refused(a, b, hessian="exact")
    assert "calculator" in _refused(a, b, calculator=None)
    assert "initial" in _refused(a.positions, b)
    # two like atoms exchanged meet halfway on the straight path: IDPP gave NaN
    # positions, blamed on the user's image ("not a finite number")
    first = Atoms("NH3", positions=[[0, 0, 0.4], [1, 0, 0], [-1, 0, 0], [0, 1, 0]])
    exchanged = first[[0, 2, 1, 3]]
    exchanged.symbols = first.symbols
    words = _refused(first, exchanged, calculator=EMT())
    assert "atoms 1 and 2 meet on the straight path between the endpoints (0.50" in words


def test_the_command_finds_and_checks_the_transition_state_of_a_hop(
    au_al, au_al_saddle, tmp_path, capsys
):
    from asebo.cli import main

    initial, final = au_al
    write(tmp_path / "initial.traj", initial)
    write(tmp_path / "final.traj", final)
    output = tmp_path / "ts.xyz"
    argv = ["ts", str(tmp_path / "initial.traj"), str(tmp_path / "final.traj"), "--calc", "emt"]
    status = main([*argv, "--images", "3", "--output", str(output), "--logfile", "-"])
    assert status == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("a first-order saddle point") and str(output) in last
    saddle = read(output)
    expected = au_al_saddle[0].atoms.get_potential_energy()
    assert saddle.get_potential_energy() == pytest.approx(expected, abs=1e-3)
    write(tmp_path / "again.traj", initial)  # the initial minimum under another name
    with pytest.raises(SystemExit) as stop:
        main(["ts", str(tmp_path / "initial.traj"), str(tmp_path / "again.traj")])
    assert stop.value.code == 2
    assert "one configuration" in capsys.readouterr().err


def test_a_workflow_cut_short_by_its_steps_goes_on_from_its_restart_files(tmp_path):
    # the search stopped at its steps and the band's climbing image went on in the
    # band's restart file: run again, the band's highest image was another and the
    # search's restart file refused it as another start (RestartError)
    pytest.importorskip("sella")
    from asebo.benchmarks.hop_saddles import HOPS

    initial, final = HOPS["pt_pt100"]()
    stem = str(tmp_path / "ts")
    short = [
        transition_state(initial, final, EMT(), n_images=3, steps=4, restart=stem) for _ in range(2)
    ]
    assert short[0].route == "climbing image after the saddle search"
    assert short[0].summary().count("imaginary mode") == 1  # the verdict says it, once
    assert (
        short[1].calls["endpoints"] == 0 and short[1].calls["band"] + short[1].calls["saddle"] > 0
    )
    whole = transition_state(initial, final, EMT(), n_images=3, restart=stem)
    again = transition_state(initial, final, EMT(), n_images=3, restart=stem)
    assert whole.verified and again.verified
    assert again.calls["band"] == again.calls["saddle"] == 0
    fresh = transition_state(initial, final, EMT(), n_images=3)
    assert whole.forward_barrier == pytest.approx(fresh.forward_barrier, abs=0.01)


def test_a_saddle_search_whose_prior_fails_on_the_band_leaves_it_to_the_climbing_image(
    tmp_path,
):
    # linear HCN and HNC: the IDPP band drives H through the C-N bond, 13 eV up, where
    # the search's GFN1-xTB prior has no SCF; the search raised the prior's error
    from calculators import get_calculator

    ends = [
        Atoms("CNH", positions=[[0, 0, 0], [0, 0, 1.16], [0, 0.05, -1.07]]),
        Atoms("CNH", positions=[[0, 0, 0], [0, 0, 1.17], [0, 0.05, 2.17]]),
    ]
    for end in ends:
        end.calc = get_calculator("gfn2")
        BFGS(end, logfile=None).run(fmax=0.01)
    log = tmp_path / "ts.log"
    result = transition_state(*ends, get_calculator("gfn2"), n_images=5, logfile=str(log))
    assert result.route == "climbing image after the saddle search"
    assert "saddle search: not converged after 0 calls (its prior has no value" in log.read_text()
    assert result.calls["saddle"] > 0 and result.code != VERIFIED


def test_endpoints_held_otherwise_or_on_a_line_are_refused_in_their_own_words(au_al):
    # endpoints with other FixAtoms were refused as "image 6 fixes other atoms", an
    # image the user never built; a FixedLine on the adatom counted it as held, and the
    # hop was refused as "one configuration"
    from ase.constraints import FixedLine

    initial, final = (end.copy() for end in au_al)
    free = final.copy()
    free.set_constraint()
    words = _refused(initial, free, calculator=EMT())
    assert "initial and final hold other atoms fixed (FixAtoms" in words
    for end in (initial, final):
        end.set_constraint([end.constraints[0], FixedLine(len(end) - 1, [1, 0, 0])])
    words = _refused(initial, final, calculator=EMT())
    assert "one configuration" not in words and "FixedLine" in words
