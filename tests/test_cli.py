"""The asebo command: start-up without the heavy imports, defaults in --help."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asebo.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_help_imports_neither_torch_nor_any_subcommand():
    code = (
        "import sys\nfrom asebo.cli import main\ntry:\n    main(['--help'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'botorch', 'dask', 'sklearn', 'rdkit', "
        "'asebo.optimize.optimizer', 'asebo.campaign.workflow') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "optimize" in done.stdout and "compare" in done.stdout and "bench" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_optimize_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["optimize", "--help"])
    assert exit_status.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--steps STEPS (default: 500)" in text
    assert "--fmax FMAX eV/Å (default: 0.05)" in text
    assert "calculator preset (default: gfn2, GFN2-xTB)" in text  # stated once, not twice
    assert "(default: None)" not in text


def test_a_zero_default_is_shown_and_a_flag_is_not(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--seed SEED seed of the perturbations (default: 0)" in text
    assert "--report run nothing: summarise (and plot) every run stored in --db --" in text
