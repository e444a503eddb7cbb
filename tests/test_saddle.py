"""BOSaddle: the saddle points of HCN and H2CO's guesses reached as Sella reaches them,
one imaginary mode there, in fewer calls; a second-order saddle point stepped off; a
walk on the model that stays within its trust radius; a resumed search that repeats no
call; bad input refused before any call."""

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, molecule
from ase.calculators.calculator import CalculationFailed, Calculator, all_changes
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixAtoms, FixBondLength
from ase.io import read
from ase.io.trajectory import Trajectory

from asebo.benchmarks._endpoint_audit import imaginary_modes
from asebo.benchmarks.ts import guess
from asebo.model.priors import CalculatorPrior
from asebo.optimize.model_calculators import ModelCalculator
from asebo.optimize.observations import RestartError
from asebo.optimize.settings import SaddleSettings
from asebo.optimize.walk_trust import distance_to
from asebo.saddle import BOSaddle
from asebo.saddle.model_search import saddle_on_model
from asebo.saddle.result import FIRST_ORDER, FLAT
from asebo.saddle.walk import NEWTON_STEP, newton_step
from calculators import CountingCalculator, get_calculator

pytest.importorskip("sella")


def counted(name):
    """Guess ``name`` of Baker and Chan with a counted GFN2-xTB."""
    atoms = guess(name)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    return atoms


def sella_saddle(name):
    """Sella's saddle point from the same guess: (atoms, calls)."""
    from sella import Sella

    atoms = counted(name)
    assert Sella(atoms, internal=True, order=1, logfile=None).run(fmax=0.05)
    return atoms, atoms.calc.ncalls


@pytest.mark.parametrize("name", ["01_hcn", "03_h2co"])
def test_the_saddle_point_is_sellas_with_one_imaginary_mode_in_fewer_calls(name):
    atoms = counted(name)
    search = BOSaddle(atoms, logfile=None)
    assert search.run(fmax=0.05)
    assert np.sqrt((atoms.get_forces() ** 2).sum(axis=1)).max() < 0.05
    reference, reference_calls = sella_saddle(name)
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), abs=0.01)
    assert len(imaginary_modes(atoms, get_calculator("gfn2"))) == 1
    assert search.model_order() == 1
    assert atoms.calc.ncalls <= reference_calls


def test_a_second_order_saddle_point_its_forces_converge_on_is_stepped_off(tmp_path):
    # from this guess the walk's forces converge after five calls where GFN2-xTB has two
    # imaginary modes (844i and 95i cm-1), the model two negative curvatures
    atoms = counted("20_hconh3_cation")
    restart, log = tmp_path / "saddle.json", tmp_path / "saddle.log"
    first = BOSaddle(atoms, restart=str(restart), logfile=str(log))
    assert not first.run(fmax=0.05, steps=4)
    assert atoms.calc.ncalls == 5
    assert np.sqrt((atoms.get_forces() ** 2).sum(axis=1)).max() < 0.05
    assert first.model_order() == 2
    first.close()
    search = BOSaddle(atoms, restart=str(restart), logfile=str(log))
    assert search.run(fmax=0.05, steps=30)
    text = log.read_text()
    assert "the model has 2 negative curvatures here" in text  # the notes, between steps
    assert "step off" in text  # the reason of the step line after it
    assert search.result.reason == FIRST_ORDER
    assert atoms.calc.ncalls == len(search.observations.energies)  # none repeated
    assert search.model_order() == 1
    assert len(imaginary_modes(atoms, get_calculator("gfn2"))) == 1


def test_the_walk_on_the_model_stays_within_the_trust_radius():
    atoms = counted("03_h2co")
    search = BOSaddle(atoms, logfile=None)
    search.run(fmax=0.05, steps=2)  # three configurations computed
    known = np.array(search.observations.positions)
    for radius in (0.01, 0.05):
        end, reason = saddle_on_model(
            ModelCalculator(search._fitted()), atoms, known, radius, 0.01, 300
        )
        assert distance_to(known, end) <= radius + 1e-9
        assert reason == "trust radius"


def test_a_search_stopped_and_resumed_repeats_no_call_and_ends_where_one_run_ends(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    whole = counted("01_hcn")
    assert BOSaddle(whole, logfile=None).run(fmax=0.05)
    files = {"restart": "saddle.json", "trajectory": "saddle.traj", "logfile": None}
    first = counted("01_hcn")
    with BOSaddle(first, **files) as search:
        assert not search.run(fmax=0.05, steps=3)
    second = counted("01_hcn")
    with BOSaddle(second, **files) as search:
        assert search.run(fmax=0.05)
        record = search.observations
    assert first.calc.ncalls + second.calc.ncalls == whole.calc.ncalls
    np.testing.assert_allclose(second.positions, whole.positions, atol=1e-3)
    again = counted("01_hcn")
    with BOSaddle(again, **files) as search:
        assert search.run(fmax=0.05)
    assert again.calc.ncalls == 0
    np.testing.assert_allclose(again.positions, second.positions)
    # the trajectory holds every call of the three runs once, in order: the first call
    # of a resumed run, made at the end of a walk from the record, was left out, and a
    # run resumed at its end emptied the file
    frames = read("saddle.traj", ":")
    assert len(frames) == whole.calc.ncalls
    np.testing.assert_allclose([f.positions for f in frames], record.positions, atol=1e-12)
    np.testing.assert_allclose([f.get_potential_energy() for f in frames], record.energies)
    with Trajectory("saddle.traj") as trajectory:  # its header describes the optimizer
        assert trajectory.description["optimizer"] == "BOSaddle"
        assert trajectory.description["trust_radius"] == SaddleSettings().trust_radius


def test_a_search_between_a_calls_record_and_its_walk_resumes_with_the_walk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = counted("01_hcn")
    with BOSaddle(first, restart="saddle.json", logfile=None) as search:
        search.run(fmax=0.05, steps=2)
        # the record as written right after the third call, before the walk from it
        search.observations.save(next=search.observations.positions[-1])
    second = counted("01_hcn")
    with BOSaddle(second, restart="saddle.json", logfile=None) as search:
        assert search.run(fmax=0.05)
        computed = np.array(search.observations.positions)
    # no configuration computed twice
    gaps = np.abs(computed[:, None] - computed[None]).max(axis=(2, 3))
    assert np.all(gaps[np.triu_indices(len(computed), 1)] > 1e-6)


def water():
    atoms = molecule("H2O")
    atoms.calc = EMT()
    return atoms


def one_atom():
    atoms = Atoms("Cu")
    atoms.calc = EMT()
    return atoms


def flat_cell():
    atoms = bulk("Cu") * 2
    atoms.cell[2] = 0.0
    atoms.calc = EMT()
    return atoms


def bond_held():
    atoms = water()
    atoms.set_constraint(FixBondLength(0, 1))
    return atoms


def no_calculator():
    return molecule("H2O")


def results_from_a_file():
    atoms = water()
    atoms.get_forces()
    atoms.calc = SinglePointCalculator(atoms, **atoms.calc.results)
    return atoms


def all_held():
    atoms = water()
    atoms.set_constraint(FixAtoms(indices=[0, 1, 2]))
    return atoms


@pytest.mark.parametrize(
    "build, message",
    [
        (one_atom, "two atoms or more"),
        (flat_cell, "zero volume"),
        (bond_held, "FixAtoms only"),
        (no_calculator, "needs a calculator"),
        (all_held, "needs an atom that moves"),
        (results_from_a_file, "needs a calculator that computes: .* SinglePointCalculator"),
    ],
)
def test_what_the_search_cannot_take_is_refused_in_one_line(build, message):
    with pytest.raises(ValueError, match=message):
        BOSaddle(build(), logfile=None)


@pytest.mark.parametrize("other", ["trajectory", "logfile"])
def test_a_restart_file_named_as_another_file_of_the_search_is_refused(tmp_path, other):
    restart = tmp_path / "search.json"
    BOSaddle(water(), restart=str(restart), logfile=None).run(steps=1)
    written = restart.read_bytes()
    options = {"logfile": None, other: str(restart)}
    with pytest.raises(ValueError, match="are the same file"):
        BOSaddle(water(), restart=str(restart), **options)
    assert restart.read_bytes() == written


def test_a_flat_region_is_no_saddle_point():
    # two hydrogen atoms 9 Å apart: the forces vanish and the model's one negative
    # curvature is 2i cm⁻¹, a free atom's plateau, not a transition state
    atoms = Atoms("H2", positions=[[0.0, 0.0, 0.0], [0.0, 0.0, 9.0]])
    atoms.calc = get_calculator("gfn2")
    search = BOSaddle(atoms, logfile=None)
    assert not search.run(fmax=0.05, steps=5)
    assert search.result.reason == FLAT and search.result.order == 0
    assert "the model is flat" in search.summary()


def test_observations_that_moved_a_held_atom_are_refused():
    free = water()
    free.rattle(0.05, seed=3)
    moved = free.copy()
    moved.positions[0] += [0.0, 0.0, 0.05]
    moved.calc = EMT()
    given = ([moved.positions], [moved.get_potential_energy()], [moved.get_forces()])
    free.set_constraint(FixAtoms(indices=[0]))
    with pytest.raises(ValueError, match="configuration 0 has atom 0 0.05 Å from where"):
        BOSaddle(free, observations=given, logfile=None)


def test_a_molecule_held_by_one_atom_ends_at_its_first_order_saddle_point():
    # held by its carbon, HCN still turns about it: those rotations are no curvature
    # of the search, and the hydrogen's transfer is the one imaginary mode left
    atoms = counted("01_hcn")
    atoms.set_constraint(FixAtoms(indices=[0]))
    search = BOSaddle(atoms, logfile=None)
    assert search.run(fmax=0.05, steps=40)
    assert search.model_order() == 1
    calc = get_calculator("gfn2")
    free = [1, 2]
    start = atoms.positions.copy()
    probe = atoms.copy()
    probe.set_constraint()
    probe.calc = calc
    hessian = np.zeros((6, 6))
    for row, (atom, axis) in enumerate((a, k) for a in free for k in range(3)):
        for sign in (1.0, -1.0):
            moved = start.copy()
            moved[atom, axis] += sign * 0.005
            probe.positions = moved
            hessian[row] -= sign * probe.get_forces()[free].ravel() / 0.01
    curvatures = np.linalg.eigvalsh(0.5 * (hessian + hessian.T))
    assert curvatures[0] < -1.0  # the transfer, eV/Å²
    assert curvatures[1] > -0.05  # the rotations about the carbon are flat, no more


@pytest.mark.parametrize("fmax", [0.0, -1.0, float("nan")])
def test_an_fmax_that_is_not_positive_is_refused_before_any_call(fmax):
    atoms = water()
    atoms.calc = CountingCalculator(EMT())
    with pytest.raises(ValueError, match="fmax"):
        BOSaddle(atoms, logfile=None).run(fmax=fmax)
    assert atoms.calc.ncalls == 0


def test_a_restart_file_of_other_atoms_or_of_a_minimisation_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atoms = counted("01_hcn")
    with BOSaddle(atoms, restart="saddle.json", logfile=None) as search:
        search.run(fmax=0.05, steps=1)
    with pytest.raises(RestartError, match="other atoms"):
        BOSaddle(water(), restart="saddle.json", logfile=None)
    from asebo import BOOptimizer

    held = FixAtoms(indices=[0])
    minimised = water()
    minimised.set_constraint(held)
    BOOptimizer(minimised, restart="minimum.json", logfile=None).run(fmax=0.05, steps=1)
    with pytest.raises(RestartError, match="not a saddle search"):
        BOSaddle(water(), restart="minimum.json", logfile=None)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(RestartError, match="broken.json"):
        BOSaddle(water(), restart="broken.json", logfile=None)


@pytest.mark.slow
def test_a_band_hands_its_climbing_image_and_its_calls_to_the_saddle_search():
    from ase.mep import NEB

    from asebo import BONEB
    from asebo.benchmarks.neb import REACTIONS, idpp_band, reaction

    initial, final, moving = reaction(REACTIONS / "02_hcn.xyz")
    positions = idpp_band(initial, final, moving)
    images = []
    for index, where in enumerate(positions):
        image = (final if index == len(positions) - 1 else initial).copy()
        image.positions = where
        image.calc = CountingCalculator(get_calculator("gfn2"))
        images.append(image)
    band = BONEB(NEB(images, climb=True, method="improvedtangent"), logfile=None)
    band.run(fmax=0.5, steps=200)  # a rough band
    search = BOSaddle.from_band(band, logfile=None)
    calc = search.atoms.calc
    before = calc.ncalls
    assert search.run(fmax=0.05)
    assert len(search.observations) > len(band.record.observations)
    assert calc.ncalls - before == len(search.observations) - len(band.record.observations)
    assert len(imaginary_modes(search.atoms, get_calculator("gfn2"))) == 1


class CentroidRipple(Calculator):
    """GFN2-xTB plus ``amplitude * cos(2 pi X / period)`` of the centroid's x, ``X``:
    a closed-form egg-box that only moves the molecule as a whole (a net force)."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, amplitude=0.01, period=0.2):
        super().__init__()
        self.calc, self.amplitude, self.period = get_calculator("gfn2"), amplitude, period

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        phase = 2 * np.pi * self.atoms.positions[:, 0].mean() / self.period
        energy = self.calc.get_potential_energy(self.atoms) + self.amplitude * np.cos(phase)
        forces = self.calc.get_forces(self.atoms).copy()
        pull = self.amplitude * 2 * np.pi / self.period * np.sin(phase) / len(self.atoms)
        forces[:, 0] += pull
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}


def test_a_net_force_the_model_cannot_see_is_walked_off_as_a_whole():
    atoms = guess("01_hcn")
    atoms.positions[:, 0] += 0.03 - atoms.positions[:, 0].mean()  # on the ripple's slope
    atoms.calc = CountingCalculator(CentroidRipple())
    search = BOSaddle(atoms, logfile=None)
    assert search.run(fmax=0.05, steps=60)
    assert np.sqrt((atoms.get_forces() ** 2).sum(axis=1)).max() < 0.05
    assert atoms.calc.ncalls == search.nsteps + 1  # every step a call
    reference, _ = sella_saddle("01_hcn")
    ripple = CentroidRipple().amplitude
    assert atoms.get_potential_energy() < reference.get_potential_energy() - ripple + 0.01


class NoValueBelow(Calculator):
    """GFN1-xTB without a value where atoms 0 and 2 are closer than ``distance`` (Å): a
    prior whose SCF fails there."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, distance):
        super().__init__()
        self.calc, self.distance = get_calculator("gfn1"), distance

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if self.atoms.get_distance(0, 2) < self.distance:
            raise CalculationFailed("SCF not converged")
        energy = self.calc.get_potential_energy(self.atoms)
        forces = self.calc.get_forces(self.atoms)
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}


def test_a_walk_stops_on_the_last_configuration_its_prior_has_a_value_for():
    atoms = guess("01_hcn")  # C, N, H; C-H 1.96 Å
    atoms.calc = get_calculator("gfn2")
    search = BOSaddle(atoms, logfile=None, prior=NoValueBelow(1.6))
    search.run(fmax=0.05, steps=1)
    gp = search._fitted()
    known = np.array(search.observations.positions)  # (m, 3, 3)
    start = atoms.get_distance(0, 2)
    # unbounded, the walk on this model ends with C-H at 1.14 Å
    end, reason = saddle_on_model(ModelCalculator(gp), atoms, known, 10.0, 0.01, 300)
    assert reason == "prior failed"
    reached = atoms.copy()
    reached.positions = end
    assert 1.6 <= reached.get_distance(0, 2) < start - 0.05
    energy, gradient = gp.predict(end[None], return_gradient=True)  # a value there
    assert np.isfinite(energy).all() and np.isfinite(gradient).all()


def test_a_walk_that_ends_on_the_call_it_started_from_steps_off_by_newton(tmp_path):
    atoms = counted("01_hcn")
    log = tmp_path / "saddle.log"
    # the model is met at once: every walk ends where it starts, a configuration computed
    search = BOSaddle(atoms, logfile=str(log), model_fmax=100.0)
    assert search.run(fmax=0.05, steps=30)
    assert search.result.reason == FIRST_ORDER
    assert NEWTON_STEP in log.read_text()
    # HCN's saddle point of GFN2-xTB, one imaginary mode by finite differences
    assert imaginary_modes(atoms, get_calculator("gfn2")) == [pytest.approx(1426, rel=0.02)]


def test_near_convergence_a_model_off_by_more_than_fmax_gives_way_to_the_newton_step():
    atoms = counted("01_hcn")
    search = BOSaddle(atoms, logfile=None, prior="lindh")
    assert search.run(fmax=0.05)
    latest = np.array(search.observations.positions[-1])
    forces = search.observations.forces[-1]
    newton = search._newton_from_computed(latest)[0]
    # the model's forces at the last call as computed: the walk goes on
    search._predicted = (latest, forces.copy(), False)
    assert search._newton_near_convergence() is None
    # off by 1.5 fmax at a call whose forces are below 2 fmax: the Newton step off it
    search.settings = SaddleSettings(newton_near=2.0)
    search._predicted = (latest, forces + 0.075 / np.sqrt(3), False)
    assert np.allclose(search._newton_near_convergence()[0], newton)
    search.settings = SaddleSettings(newton_near=0.0)
    assert search._newton_near_convergence() is None
    # under a prior calculator the model's Hessian costs its calls: the walk goes on
    search.settings, search.prior = (
        SaddleSettings(newton_near=2.0),
        CalculatorPrior(get_calculator("gfn1"), atoms),
    )
    assert search._newton_near_convergence() is None


def quadratic_saddle():
    """A Hessian (6, 6) of curvatures -1, 2 and 1e-4 eV/Å² along three coordinates of two
    atoms (the others 3), its basis of those coordinates (6, 3), and forces (2, 3)."""
    hessian = np.diag([-1.0, 2.0, 1e-4, 3.0, 3.0, 3.0])
    basis = np.eye(6)[:, :3]
    forces = np.array([[0.3, -0.4, 0.02], [0.0, 0.0, 0.0]])
    return hessian, basis, forces


def test_the_newton_step_within_its_radius_reaches_the_quadratic_saddle_point():
    hessian, basis, forces = quadratic_saddle()
    step, restricted = newton_step(hessian, basis, forces, radius=1000.0)
    assert not restricted
    # the stationary point of E(x) = -f.x + x.H.x / 2 along the basis: x = H^-1 f
    assert step[0] == pytest.approx([0.3 / -1.0, -0.4 / 2.0, 0.02 / 1e-4])
    assert np.all(step[1] == 0.0)


def test_a_restricted_newton_step_climbs_the_lowest_mode_and_keeps_the_stiff_ones():
    hessian, basis, forces = quadratic_saddle()
    step, restricted = newton_step(hessian, basis, forces, radius=0.5)
    assert restricted
    assert np.linalg.norm(step, axis=1).max() == pytest.approx(0.5, rel=1e-9)
    # up along the negative curvature, down along the stiff mode: the flat mode does not
    # take the whole radius, as a cut Newton step (200 Å along it) would
    assert step[0, 0] * forces[0, 0] < 0 and step[0, 1] * forces[0, 1] > 0
    assert abs(step[0, 1]) > 0.1
    newton, _ = newton_step(hessian, basis, forces, radius=1000.0)
    cut = newton * 0.5 / np.linalg.norm(newton, axis=1).max()
    assert abs(step[0, 1]) > 100 * abs(cut[0, 1])


def test_the_default_prior_is_gfn2_under_gpaw_and_the_other_gfn_under_tblite(tmp_path):
    pytest.importorskip("gpaw")
    from asebo.model.priors import CalculatorPrior, HighestEnergyPrior, RecentredLindh

    log = tmp_path / "saddle.log"
    atoms = guess("01_hcn")
    atoms.calc = get_calculator("gpaw")
    search = BOSaddle(atoms, logfile=str(log))
    search.close()
    assert isinstance(search.prior, CalculatorPrior)
    reference = atoms.copy()
    reference.calc = get_calculator("gfn2")
    energy, _ = search.prior.energy_and_forces(atoms.positions)
    assert energy == pytest.approx(reference.get_potential_energy(), abs=1e-8)
    assert "prior: GFN2-xTB (tblite)" in log.read_text()
    for target, other in (("gfn2", "gfn1"), ("gfn1", "gfn2")):
        atoms.calc = CountingCalculator(get_calculator(target))
        search = BOSaddle(atoms, logfile=str(log))
        search.close()
        reference.calc = get_calculator(other)
        energy, _ = search.prior.energy_and_forces(atoms.positions)
        assert energy == pytest.approx(reference.get_potential_energy(), abs=1e-8)
        assert f"({other.upper()}-xTB)" in log.read_text()
    anion = guess("16_h2po4_anion")  # charge -1 given to tblite, not in the atoms
    anion.set_initial_charges(None)
    anion.calc = get_calculator("gfn2", charge=-1)
    search = BOSaddle(anion, logfile=None)
    reference = anion.copy()
    reference.calc = get_calculator("gfn1", charge=-1)
    energy, _ = search.prior.energy_and_forces(anion.positions)
    assert energy == pytest.approx(reference.get_potential_energy(), abs=1e-8)
    atoms.calc = EMT()  # a barrier takes GFN2-xTB under any target but tblite
    assert isinstance(BOSaddle(atoms, logfile=None).prior, CalculatorPrior)
    heavy = Atoms("Fr2", positions=[[0, 0, 0], [0, 0, 4.0]])
    heavy.calc = get_calculator("gpaw")
    assert isinstance(BOSaddle(heavy, logfile=None).prior, RecentredLindh)
    assert isinstance(BOSaddle(atoms, logfile=None, prior="max").prior, HighestEnergyPrior)


def test_a_step_along_a_curvature_leaves_out_where_the_prior_has_no_value():
    # the order check's step off a second negative curvature reads the model along
    # the mode both ways; a prior whose SCF failed on one side raised from run()
    from asebo.optimize.model_hessian import descent_along

    atoms = guess("01_hcn")  # C, N, H; C-H 1.96 Å
    atoms.calc = get_calculator("gfn2")
    search = BOSaddle(atoms, logfile=None, prior=NoValueBelow(1.9))
    search.run(fmax=0.05, steps=1)
    gp, positions = search._fitted(), atoms.positions.copy()
    mode = np.zeros((3, 3))
    mode[2] = positions[0] - positions[2]  # H towards C: no value within 0.06 Å
    mode = (mode / np.linalg.norm(mode)).ravel()
    search.prior.calculator.distance = 10.0  # no value anywhere along the mode
    assert descent_along(gp, positions, mode, 0.2) is None
    search.prior.calculator.distance = 1.9
    reached = atoms.copy()
    reached.positions = descent_along(gp, positions, mode, 0.2)
    assert reached.get_distance(0, 2) >= 1.9
