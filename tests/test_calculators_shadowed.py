"""A ``calculators.py`` of the user's beside a script leaves asebo's optimizers working.

The top-level package ``calculators`` (the presets of the commands) is shadowed by any
``calculators.py`` in the working directory; the optimizers and their automatic priors
must not need it.
"""

import os
import subprocess
import sys
import textwrap

import pytest


def _python_beside_a_calculators_module(tmp_path, code):
    """Run ``code`` in a fresh interpreter whose working directory holds a
    ``calculators.py``, with asebo imported from its installation."""
    (tmp_path / "calculators.py").write_text("GREETING = 'not the presets'\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )


def test_the_optimizers_import_beside_a_calculators_module(tmp_path):
    done = _python_beside_a_calculators_module(
        tmp_path,
        """
        import calculators
        assert calculators.GREETING == "not the presets"
        from asebo import BOOptimizer, BONEB, BOSaddle
        """,
    )
    assert done.returncode == 0, done.stderr


def test_the_automatic_priors_are_built_beside_a_calculators_module(tmp_path):
    pytest.importorskip("tblite")
    done = _python_beside_a_calculators_module(
        tmp_path,
        """
        from ase.build import molecule
        from ase.calculators.emt import EMT
        from tblite.ase import TBLite

        from asebo import BOOptimizer
        from asebo.model.default_prior import default_prior
        from asebo.model.priors import CalculatorPrior

        atoms = molecule("H2O")
        atoms.rattle(0.05, seed=0)
        atoms.calc = EMT()
        optimizer = BOOptimizer(atoms, logfile=None, prior="auto")
        optimizer.run(fmax=0.05, steps=2)
        assert isinstance(optimizer.prior, CalculatorPrior), optimizer.prior

        atoms.calc = TBLite(method="GFN2-xTB", verbosity=0)
        prior = default_prior(atoms, "saddle").prior
        assert prior.parameters["method"] == "GFN1-xTB", prior.parameters
        """,
    )
    assert done.returncode == 0, done.stderr


def test_the_periodic_automatic_prior_is_built_beside_a_calculators_module(tmp_path):
    pytest.importorskip("chgnet")
    done = _python_beside_a_calculators_module(
        tmp_path,
        """
        from ase.build import bulk
        from ase.calculators.lj import LennardJones

        from asebo.model.periodic import automatic_periodic_prior
        from asebo.model.priors import CalculatorPrior

        atoms = bulk("Si", cubic=True)
        atoms.calc = LennardJones()
        prior, reason = automatic_periodic_prior(atoms, 0.0)
        assert isinstance(prior, CalculatorPrior) and "CHGNet" in reason, reason
        """,
    )
    assert done.returncode == 0, done.stderr
