"""The core install runs without the extras, and each extra's absence is named."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asebo.extras import EXTRAS, missing_extra

ROOT = Path(__file__).resolve().parents[1]
EXTRA_PACKAGES = (
    "sklearn",
    "matplotlib",
    "rdkit",
    "dask",
    "distributed",
    "qm9pack",
    "qmllib",
    "tqdm",
    "sella",
    "geometric",
)


def run_without_extras(code):
    """Run ``code`` in a fresh interpreter in which no package of an extra can be imported."""
    prelude = f"import sys\nfor name in {EXTRA_PACKAGES!r}:\n    sys.modules[name] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )


def test_boptimizer_relaxes_and_the_command_answers_without_any_extra():
    done = run_without_extras(
        "from ase.build import molecule\n"
        "from asebo import BOOptimizer\n"
        "from calculators import get_calculator\n"
        "atoms = molecule('H2O')\n"
        "atoms.rattle(0.05, seed=0)\n"
        "atoms.calc = get_calculator('emt')\n"
        "assert BOOptimizer(atoms, logfile=None).run(fmax=0.05, steps=60)\n"
        "from asebo.campaign.relax import relax\n"
        "assert relax(atoms, 'lbfgs', 'emt')['converged']\n"
        "from asebo.cli import main\n"
        "main(['--help'])\n"
    )
    assert done.returncode == 0, done.stderr
    assert "usage: asebo" in done.stdout


@pytest.mark.parametrize(
    ("module", "package", "extra"),
    [
        ("asebo.learn.mlkrr", "sklearn", "learn"),
        ("asebo.learn.iokr", "sklearn", "learn"),
        ("asebo.learn.mpiokr", "sklearn", "learn"),
        ("asebo.learn.diffusion", "sklearn", "learn"),
        ("asebo.learn.prediction", "sklearn", "learn"),
        ("asebo.campaign.workflow", "dask", "campaign"),
        ("asebo.campaign.plots", "matplotlib", "campaign"),
    ],
)
def test_a_module_of_an_extra_names_the_extra_to_install(module, package, extra):
    done = run_without_extras(f"import {module}")
    assert done.returncode != 0
    assert f"needs {package}, which is not installed: pip install 'asebo[{extra}]'" in done.stderr


def test_smiles_without_rdkit_says_what_to_install_and_a_benchmark_help_needs_no_extra():
    done = run_without_extras(
        "from asebo.smiles import molecule_from_smiles\nmolecule_from_smiles('CCO')"
    )
    assert "building a molecule from SMILES needs RDKit: pip install rdkit" in done.stderr
    # the help needs no extra; running the benchmark names the one to install
    done = run_without_extras("from asebo.cli import main\nmain(['bench', 'mlkrr', '--help'])")
    assert done.returncode == 0
    assert "usage: asebo bench mlkrr" in done.stdout


def test_an_optimizer_without_its_package_says_what_to_install():
    done = run_without_extras(
        "from asebo.cli import main\nmain(['bench', 'baker', '--optimizers', 'geometric'])"
    )
    assert done.returncode != 0
    assert "geometric optimizer needs geomeTRIC: pip install 'asebo[geometric]'" in done.stderr
    done = run_without_extras(
        "from ase.build import molecule\n"
        "from asebo.campaign.relax import relax\n"
        "relax(molecule('H2O'), 'geometric', 'emt')\n"
    )
    assert "pip install 'asebo[geometric]'" in done.stderr


def test_missing_extra_refuses_an_unknown_extra():
    error = ModuleNotFoundError("No module named 'dask'", name="dask")
    assert "pip install 'asebo[campaign]'" in str(missing_extra(error, "campaign", "x"))
    assert set(EXTRAS) >= {"learn", "campaign", "gpaw", "sella", "docs", "test"}
    with pytest.raises(ValueError, match="unknown extra 'plots'; choose one of learn, campaign"):
        missing_extra(error, "plots", "x")
