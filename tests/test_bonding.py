"""A run whose bonding changed says so, in the log and on the optimizer."""

import io

import numpy as np
from ase import Atoms
from ase.build import molecule
from ase.calculators.emt import EMT
from ase.data import covalent_radii

from asebo import BOOptimizer
from asebo.optimize.bonding import APART, BONDED, bond_changes
from calculators import get_calculator


def test_a_hydrogen_moved_from_oxygen_to_nitrogen_is_one_bond_broken_and_one_made():
    numbers = [8, 1, 7]
    first = np.array([[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [2.8, 0.0, 0.0]])
    last = first.copy()
    last[1, 0] = 2.8 - 1.01
    changes = bond_changes(numbers, first, last)
    assert changes.broken == ((0, 1),) and changes.made == ((1, 2),)
    assert changes.describe() == "bonding changed: O0-H1 broken, H1-N2 made"


def test_a_bond_stretched_at_the_start_and_relaxed_back_is_no_change():
    numbers = [6, 1]
    first = np.array([[0.0, 0.0, 0.0], [1.45, 0.0, 0.0]])  # beyond 1.2, within 1.5 radii
    last = np.array([[0.0, 0.0, 0.0], [1.09, 0.0, 0.0]])
    changes = bond_changes(numbers, first, last)
    assert not changes and changes.describe() == ""


def zigzag_copper():
    """Four copper atoms in a zigzag chain: EMT folds it into a rhombus."""
    d, angle = 2.55, np.radians(60.0)
    kink = [d * np.cos(angle), d * np.sin(angle), 0.0]
    positions = np.array([[0.0, 0.0, 0.0], [d, 0.0, 0.0], [d, 0.0, 0.0], [2 * d, 0.0, 0.0]])
    positions[2:] += kink
    atoms = Atoms("Cu4", positions=positions)
    atoms.rattle(0.02, seed=0)
    atoms.calc = EMT()
    return atoms


def test_a_run_that_folds_a_copper_chain_reports_the_bonds_made():
    atoms = zigzag_copper()
    start = atoms.get_positions()
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log)
    assert optimizer.run(fmax=0.05, steps=100)
    radii = 2 * covalent_radii[29]
    before, after = (
        np.linalg.norm(x[:, None] - x[None], axis=-1) / radii for x in (start, atoms.positions)
    )
    made = tuple(zip(*np.nonzero(np.triu((before > APART) & (after < BONDED), k=1))))
    assert made and optimizer.bonds_changed.made == made
    assert optimizer.bonds_changed.broken == ()
    lines = [line for line in log.getvalue().splitlines() if "bonding changed" in line]
    assert lines == [
        "# bonding changed: "
        + ", ".join(f"Cu{i}-Cu{j} made" for i, j in made)
        + " (first configuration to the lowest)"
    ]


def test_a_plain_relaxation_reports_no_change_and_irun_checks_too():
    ethanol = molecule("CH3CH2OH")
    ethanol.rattle(0.05, seed=2)
    ethanol.calc = get_calculator("gfn2")
    log = io.StringIO()
    optimizer = BOOptimizer(ethanol, logfile=log)
    assert list(optimizer.irun(fmax=0.05, steps=100))[-1]
    assert optimizer.bonds_changed is not None and not optimizer.bonds_changed
    assert "bonding changed" not in log.getvalue()
