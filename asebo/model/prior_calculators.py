"""The cheap calculators asebo's automatic priors build: GFN-xTB (tblite) and CHGNet.

``prior='auto'`` takes GFN2-xTB under a more expensive target, the other GFN-xTB method
under tblite for a barrier, and CHGNet for a periodic cell
(:mod:`asebo.model.priors`, :mod:`asebo.model.periodic`); they are built here, so that
the optimizers import nothing from the presets of the top-level package
``calculators`` (a ``calculators.py`` of the user's beside a script shadows it). Its
``gfn1``, ``gfn2`` and ``chgnet`` presets are these builders. Each imports its package
on use and names the line that installs it where it is missing.
"""

import contextlib
import functools
import importlib
import io

from ase.calculators.calculator import CalculationFailed, all_changes

from asebo.threads import limited_library_threads, optimizer_threads

TBLITE_INSTALL = "pip install tblite"
CHGNET_INSTALL = "pip install 'asebo[ml]'"

XTB_METHODS = {"gfn1": "GFN1-xTB", "gfn2": "GFN2-xTB"}
"""tblite's method of each GFN-xTB preset name."""


def import_or_explain(module, package, install):
    """Import ``module`` or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{package} is not installed: {install}") from exc


def gfn_xtb(method, threads=None, **kw):
    """A quiet (``verbosity=0``) tblite calculator of ``method`` (``'GFN2-xTB'``,
    ``'GFN1-xTB'``) whose SCF starts again from the atomic guess where it fails from the
    last wavefunction and which computes on ``threads`` OpenMP threads
    (:func:`guess_again_on_failure`); ``kw`` go to ``tblite.ase.TBLite`` (``charge``,
    ``multiplicity``, ``accuracy``, ...)."""
    tblite_ase = import_or_explain("tblite.ase", "tblite", TBLITE_INSTALL)
    calculator = guess_again_on_failure(tblite_ase.TBLite)
    return calculator(**{"method": method, "verbosity": 0, "threads": threads, **kw})


@functools.cache
def guess_again_on_failure(tblite_calculator):
    """tblite's calculator class, whose SCF starts again from the atomic guess where it did
    not converge from the previous configuration's wavefunction, and which computes on
    the threads the user gave.

    Its ``threads`` argument (default: ``OMP_NUM_THREADS`` where set, else one:
    :func:`asebo.threads.optimizer_threads`) holds tblite's OpenMP threads during each
    calculation, the caller's number given back afterwards. Left to OpenMP's default,
    tblite takes a thread per core, and where other work holds the cores its threads
    wait on one another.

    tblite starts each SCF from the last result of the same calculator: after a long
    move (an image of a band relaxed on a model, say) that guess can keep the SCF from
    converging where it converges from scratch. Only then is the calculation repeated,
    as ASE's calculator does for a new system (``all_changes``); a configuration whose
    SCF fails from both guesses raises tblite's ``CalculationFailed``.
    """

    class GuessingAgain(tblite_calculator):
        def __init__(self, threads=None, **kw):
            self.threads = optimizer_threads(threads)
            super().__init__(**kw)

        def calculate(self, atoms=None, properties=None, system_changes=all_changes):
            with limited_library_threads(self.threads):
                try:
                    super().calculate(atoms, properties, system_changes)
                except CalculationFailed:
                    if set(system_changes) >= set(all_changes):
                        raise  # started from the atomic guess already
                    super().calculate(atoms, properties, all_changes)

    GuessingAgain.__name__ = GuessingAgain.__qualname__ = tblite_calculator.__name__
    return GuessingAgain


def chgnet(device="cpu", **kw):
    """CHGNet's calculator with its pretrained weights, quiet, on ``device``; ``kw`` go
    to ``chgnet.model.dynamics.CHGNetCalculator``. It names its free energy (its
    energy: no electronic entropy), which ASE's cell filters ask for."""
    dynamics = import_or_explain("chgnet.model.dynamics", "CHGNet", CHGNET_INSTALL)
    model = import_or_explain("chgnet.model", "CHGNet", CHGNET_INSTALL)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its version and device
        calculator = in_a_cell(dynamics.CHGNetCalculator)(
            model.CHGNet.load(verbose=False), use_device=device, **kw
        )
    # it stores its energy as the free energy too without naming it
    calculator.implemented_properties = (*calculator.implemented_properties, "free_energy")
    return calculator


@functools.cache
def in_a_cell(calculator_class):
    """``calculator_class`` (CHGNet's), refusing atoms without a cell of three
    dimensions in one line where its graph of neighbours would fail inside a matrix
    inversion ("Singular matrix")."""

    class InACell(calculator_class):
        def calculate(self, atoms=None, properties=None, system_changes=all_changes):
            if atoms is not None and atoms.cell.rank < 3:
                raise CalculationFailed(
                    "CHGNet computes atoms in a cell: these have none (a molecule needs a "
                    "box around it, atoms.center(vacuum=6.0) and pbc=True)"
                )
            super().calculate(atoms, properties, system_changes)

    InACell.__name__ = InACell.__qualname__ = calculator_class.__name__
    InACell.__module__ = calculator_class.__module__  # known by it (default_prior.wrapped_by)
    return InACell
