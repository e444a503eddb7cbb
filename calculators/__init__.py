"""Calculator presets and wrappers for asebo.

``get_calculator(name, **kw)`` builds a calculator from a preset name (``gfn2``,
``gfn1``, ``gpaw``, ``chgnet``, ``emt``, ``lj``; see ``available()``);
``RecordingCalculator`` counts, stores and replays the calls of any ASE
calculator; ``MoleculeBoxCalculator`` gives an isolated molecule the vacuum box
a cell-based code needs; ``CellAwareGPAW`` (the ``gpaw`` preset) boxes molecules and
runs periodic Atoms in their own cell with k-points from ``kpoint_grid``;
``CountingCalculator`` counts and times calls.
"""

import importlib

from .box import MoleculeBoxCalculator
from .cell_aware_gpaw import CellAwareGPAW
from .cells import check_periodic_cell
from .counting import CountingCalculator
from .kpoints import kpoint_grid, kpoint_size
from .presets import available, get_calculator, parse_preset

__all__ = [
    "CellAwareGPAW",
    "CountingCalculator",
    "MoleculeBoxCalculator",
    "POSITION_TOLERANCE",
    "RecordingCalculator",
    "available",
    "calculator_key",
    "check_periodic_cell",
    "get_calculator",
    "kpoint_grid",
    "kpoint_size",
    "parse_preset",
]

_RECORDER = ("POSITION_TOLERANCE", "RecordingCalculator", "calculator_key")


def __getattr__(name):
    # the recorder brings ase.db and ase.io: imported on first use, so that
    # ``asebo optimize --help`` starts quickly
    if name in _RECORDER:
        return getattr(importlib.import_module("calculators.recorder"), name)
    raise AttributeError(f"module 'calculators' has no attribute {name!r}")
