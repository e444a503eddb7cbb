"""ASE's own NEB tests, with BONEB in place of their optimizers.

The systems, starts and assertions of ASE's test suite (``ase/test/neb``: ``test_neb``,
``test_neb_tr``, ``test_COCu111``, ``test_dynamic_neb``, ``test_precon_neb``,
``test_autoneb``'s Au2Ag), written anew here: BONEB is an ASE optimizer of the band, so
what ASE's NEB tools read of a band (its trajectory, ``iterimages``, ``NEBTools``,
``ase nebplot``, ``AutoNEB``) must read it as they read ASE's own optimizers' bands.
Where an assertion of ASE's test differs here, the comment says why.
"""

import subprocess
import sys
from math import sqrt

import numpy as np
import pytest
from ase import Atom, Atoms
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT
from ase.calculators.lj import LennardJones
from ase.calculators.morse import MorsePotential
from ase.constraints import FixAtoms, FixBondLength
from ase.geometry.geometry import find_mic, get_distances
from ase.io import Trajectory, read
from ase.mep import NEB, AutoNEB, DyNEB, NEBTools
from ase.optimize import BFGS, ODE12r, QuasiNewton

from asebo import BONEB

pytestmark = pytest.mark.filterwarnings("ignore:The default method has changed")


class Counting(EMT):
    """EMT that counts its calculations in a list shared by every copy."""

    counted: list = []

    def calculate(self, *args, **kwargs):
        Counting.counted.append(1)
        super().calculate(*args, **kwargs)


def h7_band():
    """ASE's ``test_neb``: an H atom over a fixed H6 sheet (Morse), two moving images."""
    initial = Atoms(
        "H7",
        positions=[(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 2, 0), (1, 2, 0), (0.5, 0.5, 1)],
        constraint=[FixAtoms(range(6))],
        calculator=MorsePotential(),
    )
    QuasiNewton(initial, logfile=None).run(fmax=0.01)
    final = initial.copy()
    final.calc = MorsePotential()
    final.positions[6, 1] = 2 - initial.positions[6, 1]
    QuasiNewton(final, logfile=None).run(fmax=0.01)
    images = [initial, initial.copy(), initial.copy(), final]
    for image in images[1:-1]:
        image.calc = MorsePotential()
    neb = NEB(images)
    neb.interpolate()
    return neb


def test_h7_band_then_climbing_image_read_back_from_the_trajectory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # NEBTools.plot_bands writes nebplots.pdf here
    neb = h7_band()
    trajectory = tmp_path / "mep.traj"
    optimizer = BONEB(neb, trajectory=str(trajectory), logfile=None)
    assert optimizer.run(fmax=0.05)
    neb.climb = True
    assert optimizer.run(fmax=0.05)  # the same optimizer goes on with the climbing image
    assert len(list(neb.iterimages())) == 4  # a band's images, with no further call

    tools = NEBTools(read(trajectory, index="-4:"))  # the last band, as ASE's test reads it
    assert tools.get_fmax(climb=True) < 0.05
    barrier, _ = tools.get_barrier()
    assert abs(barrier - 1.389) < 0.001
    tools.plot_band()
    NEBTools(read(trajectory, index="-8:")).plot_bands()  # two bands
    plotted = tmp_path / "bands.pdf"
    done = subprocess.run(
        [sys.executable, "-m", "ase", "nebplot", "--nimages", "4", str(trajectory), str(plotted)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert plotted.stat().st_size > 0


def o4_band(remove_rotation_and_translation):
    """ASE's ``test_neb_tr``: four O atoms (Lennard-Jones), three moving images from an
    IDPP path."""
    initial = Atoms(
        "O4",
        [
            (1.94366484, 2.24788196, 2.32204726),
            (3.05353823, 2.08091038, 2.30712548),
            (2.63770601, 3.05694348, 2.67368242),
            (2.50579418, 2.12540646, 3.28585811),
        ],
        cell=(5, 5, 5),
    )
    final = Atoms(
        "O4",
        [
            (1.95501370, 2.22270649, 2.33191017),
            (3.07439495, 2.13662682, 2.31948449),
            (2.44730550, 1.26930465, 2.65964947),
            (2.52788189, 2.18990240, 3.29728667),
        ],
        cell=(5, 5, 5),
    )
    images = [initial] + [initial.copy() for _ in range(3)] + [final]
    for image in images:
        image.calc = LennardJones()
    neb = NEB(images, remove_rotation_and_translation=remove_rotation_and_translation)
    neb.interpolate()
    neb.idpp_interpolate(fmax=0.1, optimizer=BFGS)
    return images


@pytest.mark.slow
def test_removing_rotation_and_translation_reaches_the_barrier_in_fewer_steps(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the IDPP path writes its log and trajectory here
    barriers, steps = {}, {}
    for removed in (True, False):
        images = o4_band(removed)
        first = NEB(images, remove_rotation_and_translation=removed)
        BONEB(first, logfile=None).run(fmax=0.05, steps=20)
        climbing = NEB(images, climb=True, remove_rotation_and_translation=removed)
        optimizer = BONEB(climbing, logfile=None)
        assert optimizer.run(fmax=0.01, steps=300)
        barriers[removed], _ = NEBTools(images).get_barrier(fit=False)
        steps[removed] = optimizer.nsteps
    assert abs(barriers[True] - barriers[False]) < 1e-2
    assert steps[True] < 0.7 * steps[False]


def co_on_cu111():
    """ASE's ``test_COCu111``: CO on a two-layer Cu(111) slab (EMT), its lower layer
    held, from one top-site orientation to another; an IDPP band of three moving images."""
    a = 3.6
    d = a / sqrt(2)
    cell = [(d, 0, 0), (d / 2, d * sqrt(3) / 2, 0), (d / 2, d * sqrt(3) / 6, -a / sqrt(3))]
    slab = Atoms("Cu", cell=cell, pbc=True) * (2, 2, 2)
    slab.set_cell([2 * d, d * sqrt(3), 1])
    slab.set_pbc((1, 1, 0))
    heights = slab.positions[:, 2]
    held = FixAtoms(indices=np.flatnonzero(heights < heights.mean()))
    slab.set_constraint(held)
    slab.calc = EMT()
    QuasiNewton(slab, logfile=None).run(fmax=0.05)
    slab += Atom("C", (d / 2, -0.6, 1.5))
    slab += Atom("O", (d / 2, 0.6, 1.5))
    QuasiNewton(slab, logfile=None).run(fmax=0.05)
    images = [slab]
    for _ in range(4):
        image = slab.copy()
        image.set_constraint(held)
        image.calc = EMT()
        images.append(image)
    last = images[-1]
    last[-2].position = last[-1].position
    last[-1].x, last[-1].y = d, d / sqrt(3)
    QuasiNewton(last, logfile=None).run(fmax=0.05)
    neb = NEB(images)
    neb.interpolate(method="idpp")
    return neb


def test_co_on_cu111_band_and_its_trajectorys_description(tmp_path):
    neb = co_on_cu111()
    with BONEB(neb, maxstep=0.04, trajectory=str(tmp_path / "mep.traj"), logfile=None) as band:
        assert band.run(fmax=0.1)
    with Trajectory(tmp_path / "mep.traj") as trajectory:
        assert trajectory.description["optimizer"] == "BONEB"
        assert trajectory.description["maxstep"] == 0.04
    reference = co_on_cu111()
    assert BFGS(reference, maxstep=0.04, logfile=None).run(fmax=0.1)
    barrier, _ = NEBTools(neb.images).get_barrier(fit=False)
    assert barrier == pytest.approx(NEBTools(reference.images).get_barrier(fit=False)[0], abs=5e-3)


def pt_o_endpoints():
    """ASE's ``test_dynamic_neb``: O on Pt(111), hollow to hollow (EMT), relaxed."""
    initial = fcc111("Pt", size=(3, 2, 3), orthogonal=True)
    initial.center(axis=2, vacuum=10)
    oxygen = Atoms("O")
    oxygen.translate(initial[7].position + (0.0, 0.0, 3.5))
    initial.extend(oxygen)
    initial.calc = EMT()
    BFGS(initial, logfile=None).run(fmax=0.03)
    final = initial.copy()
    final[18].x += 2.8
    final[18].y += 1.8
    final.calc = EMT()
    BFGS(final, logfile=None).run(fmax=0.03)
    return initial, final


@pytest.mark.slow
def test_dynamic_relaxation_scaled_takes_fewer_calls_to_the_same_barrier():
    initial, final = pt_o_endpoints()
    calls, highest = {}, {}
    for kind, options in {
        "default": {"dynamic_relaxation": False},
        "dynamic": {"fmax": 0.03, "dynamic_relaxation": True},
        "scaled": {"fmax": 0.03, "dynamic_relaxation": True, "scale_fmax": 6.0},
    }.items():
        images = [initial] + [initial.copy() for _ in range(7)] + [final]
        for image in images[1:-1]:
            image.calc = Counting()
        neb = DyNEB(images, **options)
        neb.interpolate()
        Counting.counted.clear()
        assert BONEB(neb, logfile=None).run(fmax=0.03, steps=300)
        calls[kind] = len(Counting.counted)
        highest[kind] = max(image.get_potential_energy() for image in images[1:-1])
    # BONEB computes no image whose NEB force meets fmax in any case, which is what
    # the dynamic relaxation adds to ASE's optimizers: the two take the same calls
    assert calls["scaled"] < calls["dynamic"] <= calls["default"]
    assert abs(highest["dynamic"] - highest["default"]) < 1e-3
    assert abs(highest["scaled"] - highest["default"]) < 1e-3


def morse():
    return MorsePotential(A=4.0, epsilon=1.0, r0=2.55)


@pytest.fixture(scope="module")
def cu_vacancy():
    """ASE's ``test_precon_neb``: a vacancy hop in Cu (Morse), three moving images, and
    the saddle point by a bond held at the band's middle image: (images, saddle)."""
    initial = bulk("Cu", cubic=True) * 2
    _, lengths = get_distances(np.diag(initial.cell) / 2, initial.positions, initial.cell, True)
    vacancy = lengths.argmin()
    site = initial.positions[vacancy].copy()
    del initial[vacancy]
    vectors, lengths = get_distances(site, initial.positions, initial.cell, True)
    vectors, lengths = vectors[0], lengths[0]
    hopping = np.flatnonzero(np.abs(lengths - lengths.min()) < 1e-8)[0]
    opposite = ((vectors + vectors[hopping]) ** 2).sum(axis=1).argmin()
    final = initial.copy()
    final.positions[hopping] = site
    for state in (initial, final):
        state.calc = morse()
        ODE12r(state, logfile=None).run(fmax=1e-3)
    images = [initial] + [initial.copy() for _ in range(3)] + [final]
    NEB(images).interpolate()
    saddle = images[2].copy()
    saddle.calc = morse()
    saddle.set_constraint(FixBondLength(hopping, opposite))
    ODE12r(saddle, logfile=None).run(fmax=1e-2)
    return images, saddle


def copied(images):
    copies = [image.copy() for image in images]
    for image in copies:
        image.calc = morse()
    return copies


@pytest.mark.slow
@pytest.mark.parametrize("method", ["aseneb", "improvedtangent"])
def test_cu_vacancy_band_reaches_the_barrier_of_the_held_bond(cu_vacancy, method):
    images, saddle = cu_vacancy
    band = copied(images)
    assert BONEB(NEB(band, k=0.1, method=method), logfile=None).run(fmax=1e-2, steps=200)
    expected = NEBTools([band[0], saddle, band[-1]]).get_barrier(fit=False)
    barrier, change = NEBTools(band).get_barrier(fit=False)
    assert abs(barrier - expected[0]) < 1e-2
    assert abs(change - expected[1]) < 1e-2
    # ASE's test holds the middle image within 0.01 Å of the saddle point; at fmax
    # 0.01 eV/Å springs of 0.1 eV/Å² leave it 0.1 Å along the band, and BONEB stops
    # within 0.03 Å
    offset, _ = find_mic(band[2].positions - saddle.positions, band[2].cell)
    assert abs(offset).max() < 0.03


@pytest.mark.parametrize(
    "options, words",
    [
        ({"method": "spline"}, "method 'spline'"),
        ({"method": "string", "precon": "Exp"}, "method 'string'"),
    ],
)
def test_what_the_model_band_cannot_honour_is_refused_before_any_call(cu_vacancy, options, words):
    images, _ = cu_vacancy
    band = copied(images)
    with pytest.raises(ValueError, match=words):
        BONEB(NEB(band, **options), logfile=None)
    assert all(image.calc.results == {} for image in band)


def test_autoneb_drives_boneb_to_ases_au2ag_barrier(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def attach_calculators(images):
        for image in images:
            image.calc = EMT()

    d = 4
    initial = Atoms("Au2Ag", positions=((-d, 0, 0), (-d / 2, 0, 0), (d, 0, 0)))
    middle = initial.copy()
    middle[1].position[0] = 0
    final = initial.copy()
    final[1].position[0] += d
    attach_calculators([initial, middle, final])
    for image in (initial, middle, final):
        image.set_constraint(FixAtoms([0, 2]))
    for image in (initial, final):
        QuasiNewton(image, logfile=None).run(fmax=0.05)
    middle.get_forces()
    prefix = tmp_path / "subdir" / "neb"
    prefix.parent.mkdir()
    for index, image in enumerate([initial, middle, final]):
        image.write(f"{prefix}00{index}.traj")
    autoneb = AutoNEB(
        attach_calculators,
        prefix=prefix,
        optimizer=BONEB,
        n_simul=1,
        n_max=5,
        fmax=0.05,
        k=0.5,
        parallel=False,
        maxsteps=[20, 1000],
    )
    autoneb.run()
    assert NEBTools(autoneb.all_images).get_barrier()[0] == pytest.approx(4.185, 1e-3)
