"""The asebo command: start-up without the heavy imports, plain-text help, defaults in --help."""

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import asebo.benchmarks
import asebo.commands
from asebo.cli import main, plain_text

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "botorch", "sklearn", "dask", "matplotlib", "rdkit", "asebo.optimize")


def _python(code, *options):
    """Run ``code`` in a fresh interpreter on this checkout; returns the finished process."""
    return subprocess.run(
        [sys.executable, *options, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def _names(package):
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
    )


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
    assert "(gfn2:charge=1, gpaw:h=0.25) (default: gfn2, GFN2-xTB)" in text  # stated once
    assert "(default: None)" not in text


def test_a_zero_default_is_shown_and_a_flag_is_not(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--seed SEED seed of the perturbations (default: 0)" in text
    assert "--report run nothing: summarise (and plot) every run stored in --db --" in text


def test_no_command_help_imports_torch_or_an_extra():
    commands = [[name] for name in _names(asebo.commands)]
    commands += [["bench", name] for name in _names(asebo.benchmarks)]
    code = f"""
import contextlib, io, json, sys
from asebo.cli import main
heavy = {HEAVY!r}
imported = {{}}
for argv in {commands!r}:
    before = {{m for m in heavy if m in sys.modules}}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main([*argv, "--help"])
        except SystemExit as exit_status:
            assert exit_status.code == 0, (argv, exit_status.code)
    assert "usage: asebo " + " ".join(argv) in out.getvalue(), argv
    imported[" ".join(argv)] = sorted({{m for m in heavy if m in sys.modules}} - before)
print(json.dumps(imported))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert "optimize" in imported and "bench baker" in imported
    assert {argv: modules for argv, modules in imported.items() if modules} == {}


def test_plain_text_takes_out_roles_literals_and_emphasis():
    text = (
        "* ``IOKR``: :class:`asebo.learn.iokr.IOKRCV` and :class:`~asebo.learn.mpiokr.MPIOKR`,\n"
        "  a *library* of :mod:`asebo.learn.qm9` (see :ref:`the table <tables>`), 3 * 4"
    )
    assert plain_text(text) == (
        "* IOKR: asebo.learn.iokr.IOKRCV and MPIOKR,\n"
        "  a library of asebo.learn.qm9 (see the table), 3 * 4"
    )


@pytest.mark.parametrize(("argv", "package"), [([], asebo.commands), (["bench"], asebo.benchmarks)])
def test_help_lists_each_command_on_one_line_with_its_docstring_summary(
    argv, package, capsys, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_status:
        main([*argv, "--help"])
    assert exit_status.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and ":mod:" not in text
    for name in _names(package):
        module = importlib.import_module(f"{package.__name__}.{name}")
        first_line = module.__doc__.strip().splitlines()[0]
        assert re.search(rf"^ +{name} +{re.escape(plain_text(first_line))}$", text, re.M), name


def test_a_benchmark_description_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "iokr", "--help"])
    text = capsys.readouterr().out
    assert "* IOKR: asebo.learn.iokr.IOKRCV, on the first input kernel" in text
    assert not re.search(r"``|:class:|:mod:|\*library\*", text)


@pytest.mark.parametrize("name", ["mlkrr", "iokr", "diffusion"])
def test_a_missing_extra_stops_a_benchmark_with_one_line(name):
    code = (
        "import sys\n"
        "sys.modules['sklearn'] = None  # scikit-learn, of the learn extra, not installed\n"
        "from asebo.cli import main\n"
        f"main(['bench', '{name}'])"
    )
    done = _python(code)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asebo: "), done.stderr
    assert "sklearn" in done.stderr and "pip install 'asebo[learn]'" in done.stderr


def test_the_prediction_benchmark_offers_every_model():
    from asebo.benchmarks.prediction import MODEL_NAMES
    from asebo.learn.prediction import MODELS

    assert MODEL_NAMES == tuple(MODELS)


def test_importing_and_a_first_relaxation_print_no_deprecation_warning():
    code = (
        "from ase.build import molecule\n"
        "from ase.calculators.emt import EMT\n"
        "from asebo import BOOptimizer, DiffusionMap, IOKR, MLKRR, MPIOKR\n"
        "import asebo.model.gp, asebo.optimize.search, asebo.learn.prediction\n"
        "atoms = molecule('H2O')\n"
        "atoms.rattle(0.05, seed=1)\n"
        "atoms.calc = EMT()\n"
        "BOOptimizer(atoms, logfile=None).run(fmax=0.05, steps=3)\n"
        "print('relaxed')"
    )
    done = _python(code, "-W", "default::DeprecationWarning")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("relaxed")
    assert "DeprecationWarning" not in done.stderr, done.stderr


@pytest.mark.parametrize("option", ["--prior", "--calculator"])
@pytest.mark.parametrize(
    "command, case, optimizer",
    [
        ("ts", ["--guesses", "01_hcn"], "BOSaddle"),
        ("neb", ["--set", "reactions"], "BONEB"),
    ],
)
def test_barrier_benchmarks_refuse_an_unknown_preset_before_any_run(
    command, case, optimizer, option, capsys
):
    with pytest.raises(
        SystemExit, match=f"asebo bench {command} {option}: unknown (calculator|prior) .nonsense."
    ):
        main(["bench", command, *case, option, "nonsense"])
    assert optimizer not in capsys.readouterr().out


@pytest.mark.parametrize("folder, present", [("baker_ts", "01_hcn"), ("reactions", "18_sn2")])
def test_the_saddle_benchmark_names_a_sets_guesses_where_none_matches(folder, present, capsys):
    with pytest.raises(SystemExit, match=f"no guess of --set {folder} matches nothere.*{present}"):
        main(["bench", "ts", "--set", folder, "--guesses", "nothere"])
    assert "BOSaddle" not in capsys.readouterr().out


def test_version_prints_the_installed_version_and_exits_0(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_status:
        main(["--version"])
    assert exit_status.value.code == 0
    assert capsys.readouterr().out.split() == ["asebo", version("asebo")]
    import asebo

    assert asebo.__version__ == version("asebo")


def test_compare_help_lists_every_optimizer_its_error_accepts(capsys):
    from asebo.campaign.plan import parse_optimizer
    from asebo.campaign.relax import OPTIMIZERS

    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    with pytest.raises(ValueError) as refused:
        parse_optimizer("nonsense")
    accepted = re.search(r"choose among (.*) or bo", str(refused.value))[1].split(", ")
    assert accepted == list(OPTIMIZERS)
    listed = re.search(r"--optimizers OPTIMIZER \[OPTIMIZER \.\.\.\] (.*?), or bo\+PRIOR", text)
    assert listed is not None, text
    assert listed[1].split(", ") == accepted
