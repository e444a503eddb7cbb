"""The log reads as ASE's: the header first, step lines in ASE's columns, notes apart."""

import re

import numpy as np
from ase.build import bulk, molecule
from ase.calculators.emt import EMT

from asebo import BOOptimizer
from calculators import get_calculator

ASE_HEADER = ["Step", "Time", "Energy", "fmax"]  # ase.optimize.optimize.Optimizer.log


def read_ase_log(text, name="BOOptimizer"):
    """The header's columns and the step lines of a log as a parser of ASE's format reads
    it: every line that starts with ``NAME:`` is a step (step, time, energy, fmax, and
    what follows); the other lines, after the header, are returned apart."""
    lines = text.splitlines()
    header, steps, others = lines[0].split(), [], []
    assert lines[0].startswith(" " * len(name) + "  ")  # ASE's blank name column
    for line in lines[1:]:
        if not line.startswith(f"{name}:"):
            others.append(line)
            continue
        fields = line.split()
        assert re.fullmatch(r"\d\d:\d\d:\d\d", fields[2]), line
        steps.append((int(fields[1]), float(fields[3]), float(fields[4]), fields[5:]))
    return header, steps, others


def check_log(text, opt):
    """The log of ``opt``'s run read as ASE's: its steps, and the notes without their
    ``# ``."""
    header, steps, others = read_ase_log(text)
    assert header[:4] == ASE_HEADER and header[4:] == ["Predicted", "Reason"]
    assert [step[0] for step in steps] == list(range(opt.nsteps + 1))
    np.testing.assert_allclose([step[1] for step in steps], opt.energies, atol=1e-6)
    assert [step[3][-1] for step in steps[1:]] == opt.reasons
    assert all(line.startswith("# ") for line in others)
    return [line[2:] for line in others]


def test_notes_of_the_constructor_come_after_the_header(tmp_path):
    atoms = molecule("H2O")
    atoms.rattle(0.05, seed=3)
    atoms.calc = get_calculator("gfn2")
    log = tmp_path / "bo.log"
    opt = BOOptimizer(atoms, logfile=str(log), prior="auto")
    assert opt.run(fmax=0.05, steps=20)
    notes = check_log(log.read_text(), opt)
    assert notes[0].startswith("prior='auto': ")  # written by the constructor
    assert notes[-1].startswith("at convergence, lowest model curvature")


def test_a_periodic_run_with_notes_between_its_steps_reads_as_ases_log(tmp_path):
    atoms = bulk("Cu", cubic=True) * (2, 1, 1)
    atoms.rattle(0.15, seed=4)
    atoms.calc = EMT()
    log = tmp_path / "bo.log"
    opt = BOOptimizer(atoms, logfile=str(log))
    opt.run(fmax=0.01, steps=40)
    notes = check_log(log.read_text(), opt)
    assert notes[0] == "periodic cell: kernel 'periodic', prior springs"
    lines = log.read_text().splitlines()
    first_step = next(k for k, line in enumerate(lines) if line.startswith("BOOptimizer:"))
    between = [line for line in lines[first_step:] if line.startswith("# ")]
    assert between  # notes between the steps, each a comment
