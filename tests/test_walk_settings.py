"""The settings of the band and the saddle search: one home with BOOptimizer's, their
drivers' arguments shortcuts into them, and the drivers' shared parts in one place."""

import ast
from pathlib import Path

import pytest
from ase import Atoms

from asebo.optimize.resolve import WALK_SHORTCUTS, resolve_walk_settings
from asebo.optimize.settings import BandSettings, SaddleSettings, WalkTrustSettings

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", [BandSettings, SaddleSettings])
def test_a_shortcut_writes_into_its_field_and_one_given_both_ways_must_agree(kind):
    resolved = resolve_walk_settings(kind, kind(model_steps=50), maxstep=0.3, model_fmax=0.01)
    assert (resolved.max_trust_radius, resolved.model_fmax, resolved.model_steps) == (
        0.3,
        0.01,
        50,
    )
    assert resolve_walk_settings(kind, maxstep=0.05).trust_radius == 0.05  # capped
    with pytest.raises(ValueError, match="disagree"):
        resolve_walk_settings(kind, kind(max_trust_radius=0.4), maxstep=0.3)
    with pytest.raises(ValueError, match="disagree"):
        resolve_walk_settings(kind, max_trust_radius=0.4, maxstep=0.3)


@pytest.mark.parametrize(
    "given, words",
    [
        ({"trust_radius": 0.0}, "trust_radius must be"),
        ({"model_fmax": float("nan")}, "model_fmax must be"),
        ({"model_steps": 2.5}, "model_steps must be"),
        ({"uncertainty": -1.0}, "uncertainty must be"),
    ],
)
def test_a_value_out_of_range_is_refused(given, words):
    with pytest.raises(ValueError, match=words):
        resolve_walk_settings(BandSettings, **given)


def test_every_shortcut_names_a_field_of_the_band():
    fields = set(BandSettings.__dataclass_fields__)
    assert set(WALK_SHORTCUTS.values()) <= fields
    assert set(WALK_SHORTCUTS.values()) - {"uncertainty"} <= set(
        SaddleSettings.__dataclass_fields__
    )


def test_the_saddle_search_takes_its_settings():
    pytest.importorskip("sella")
    from asebo import BOSaddle
    from calculators import get_calculator

    atoms = Atoms("HCN", positions=[[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [2.2, 0.3, 0.0]])
    atoms.calc = get_calculator("gfn2")
    walk = WalkTrustSettings(min_radius=0.05)
    search = BOSaddle(atoms, logfile=None, settings=SaddleSettings(walk=walk), maxstep=0.3)
    assert search.settings.walk.min_radius == 0.05
    assert (search.settings.max_trust_radius, search.trust_radius) == (0.3, 0.1)


def imported_modules(folder):
    """Every module that a file of the package folder imports."""
    names = set()
    for path in (ROOT / "asebo" / folder).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
    return names


def test_the_saddle_search_imports_nothing_of_the_band():
    assert not [name for name in imported_modules("saddle") if name.startswith("asebo.neb")]


def test_a_restart_file_of_another_kind_of_run_is_refused_by_each_driver(tmp_path):
    pytest.importorskip("sella")
    from ase.calculators.emt import EMT
    from ase.mep import NEB

    from asebo import BONEB, BOOptimizer, BOSaddle
    from asebo.optimize.observations import RestartError

    def cluster():
        atoms = Atoms("Cu3", positions=[[0, 0, 0], [2.5, 0, 0], [1.2, 2.1, 0.1]])
        atoms.calc = EMT()
        return atoms

    files = {name: tmp_path / f"{name}.json" for name in ("minimisation", "band", "saddle")}
    BOOptimizer(cluster(), restart=files["minimisation"], logfile=None).run(steps=1)
    moved = cluster()
    moved.positions[2, 1] = -2.1
    images = [cluster(), cluster(), moved]
    BONEB(NEB(images), restart=files["band"], logfile=None).run(steps=1)
    BOSaddle(cluster(), restart=files["saddle"], logfile=None).run(steps=1)
    drivers = {
        "minimisation": lambda restart: BOOptimizer(cluster(), restart=restart, logfile=None),
        "band": lambda restart: BONEB(NEB(images), restart=restart, logfile=None),
        "saddle": lambda restart: BOSaddle(cluster(), restart=restart, logfile=None),
    }
    for driver, make in drivers.items():
        for kind, path in files.items():
            if kind != driver:
                written = path.read_bytes()
                with pytest.raises(RestartError):
                    make(path)
                assert path.read_bytes() == written


def three_drivers(cluster):
    """Each driver's constructor ``make(option, restart)`` on ``cluster(option)``'s
    atoms (the band's last image ``cluster(option, moved=True)``)."""
    from ase.mep import NEB

    from asebo import BONEB, BOOptimizer, BOSaddle

    return {
        "minimisation": lambda option, restart: BOOptimizer(
            cluster(option), restart=restart, logfile=None
        ),
        "band": lambda option, restart: BONEB(
            NEB([cluster(option), cluster(option), cluster(option, moved=True)]),
            restart=restart,
            logfile=None,
        ),
        "saddle": lambda option, restart: BOSaddle(cluster(option), restart=restart, logfile=None),
    }


@pytest.mark.parametrize(
    ("first", "again", "words"),
    [
        ({}, {"pbc": True, "cell": [12.0, 12.0, 12.0]}, "periodic boundary conditions"),
        ({"pbc": True, "cell": [12.0, 12.0, 12.0]}, {}, "periodic boundary conditions"),
        (
            {"pbc": True, "cell": [12.0, 12.0, 12.0]},
            {"pbc": True, "cell": [12.0, 12.0, 12.5]},
            "another cell",
        ),
        ({}, {"charge": 1.0}, "initial charges summing to 0, not these atoms' 1"),
        ({}, {"magmom": 2.0}, "initial magnetic moments summing to 0, not these atoms' 2"),
    ],
    ids=[
        "molecule, then periodic",
        "periodic, then molecule",
        "another cell",
        "another charge",
        "another spin",
    ],
)
def test_a_restart_file_of_another_system_is_refused_by_each_driver(tmp_path, first, again, words):
    pytest.importorskip("sella")
    from ase.calculators.emt import EMT

    from asebo.optimize.observations import RestartError

    def cluster(system, moved=False):
        atoms = Atoms("Cu3", positions=[[0, 0, 0], [2.5, 0, 0], [1.2, -2.1 if moved else 2.1, 0.1]])
        atoms.set_pbc(system.get("pbc", False))
        atoms.set_cell(system.get("cell", None))
        atoms.set_initial_charges([system.get("charge", 0.0), 0.0, 0.0])
        atoms.set_initial_magnetic_moments([system.get("magmom", 0.0), 0.0, 0.0])
        atoms.calc = EMT()
        return atoms

    drivers = three_drivers(cluster)
    for name, make in drivers.items():
        restart = tmp_path / f"{name}.json"
        make(first, str(restart)).run(steps=1)
        written = restart.read_bytes()
        with pytest.raises(RestartError, match=words):
            make(again, str(restart))
        assert restart.read_bytes() == written
        make(first, str(restart))  # the run's own system resumes


def test_a_restart_file_computed_without_the_runs_constraints_is_refused_by_each_driver(
    tmp_path,
):
    # a search under FixAtoms cannot reach configurations that moved the atoms it holds:
    # resumed from them, the model's lowest point stays out of reach call after call
    pytest.importorskip("sella")
    from ase.calculators.emt import EMT
    from ase.constraints import FixAtoms

    from asebo.optimize.observations import RestartError

    def cluster(held, moved=False):
        atoms = Atoms(
            "Cu4",
            positions=[[0, 0, 0], [2.5, 0, 0], [1.2, -2.1 if moved else 2.1, 0.1], [1.2, 0.7, 2.0]],
        )
        if held:
            atoms.set_constraint(FixAtoms(indices=[0]))
        atoms.calc = EMT()
        return atoms

    drivers = three_drivers(cluster)
    for name, make in drivers.items():
        restart = tmp_path / f"{name}.json"
        make(False, str(restart)).run(fmax=0.01, steps=4)
        written = restart.read_bytes()
        with pytest.raises(RestartError, match="computed without this run's constraints"):
            make(True, str(restart))
        assert restart.read_bytes() == written
        make(False, str(restart))  # without the constraint it resumes


LOCK_HOLDER = """
import fcntl, sys
with open(sys.argv[1], "a") as fd:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_restart_file_another_process_runs_is_refused_and_its_files_left(tmp_path):
    pytest.importorskip("sella")
    import subprocess
    import sys

    from ase.calculators.emt import EMT
    from ase.mep import NEB

    from asebo import BONEB, BOSaddle
    from asebo.optimize.observations import RestartError

    def cluster():
        atoms = Atoms("Cu3", positions=[[0, 0, 0], [2.5, 0, 0], [1.2, 2.1, 0.1]])
        atoms.calc = EMT()
        return atoms

    moved = cluster()
    moved.positions[2, 1] = -2.1
    drivers = {
        "band": lambda files: BONEB(NEB([cluster(), cluster(), moved]), logfile=None, **files),
        "saddle": lambda files: BOSaddle(cluster(), logfile=None, **files),
    }
    for name, make in drivers.items():
        restart, trajectory = tmp_path / f"{name}.json", tmp_path / f"{name}.traj"
        trajectory.write_bytes(b"the other process's frames")
        holder = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, f"{restart}.lock"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(RestartError, match="in use by another process"):
                make({"restart": str(restart), "trajectory": str(trajectory)})
        finally:
            holder.communicate("")
        assert trajectory.read_bytes() == b"the other process's frames"
        assert not restart.exists()
