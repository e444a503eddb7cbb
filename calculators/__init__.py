"""Calculator presets and wrappers for asebo.

``get_calculator(name, **kw)`` builds a calculator from a preset name (``gfn2``,
``gfn1``, ``gpaw``, ``emt``, ``lj``; see ``available()``);
``RecordingCalculator`` counts, stores and replays the calls of any ASE
calculator; ``MoleculeBoxCalculator`` gives an isolated molecule the vacuum box
a cell-based code needs; ``CountingCalculator`` counts and times calls.
"""

from .box import MoleculeBoxCalculator
from .counting import CountingCalculator
from .presets import available, get_calculator, parse_preset
from .recorder import POSITION_TOLERANCE, RecordingCalculator, calculator_key

__all__ = [
    "CountingCalculator",
    "MoleculeBoxCalculator",
    "POSITION_TOLERANCE",
    "RecordingCalculator",
    "available",
    "calculator_key",
    "get_calculator",
    "parse_preset",
]
