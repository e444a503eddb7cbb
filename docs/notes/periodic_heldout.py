"""Periodic systems outside the shipped sets: the check that the periodic defaults hold.

14 EMT systems (28 starts) built with the shipped sets' helpers but from other
elements, facets and defects than ``asebo bench surfaces`` and ``asebo bench bulk``.
Takes the options of those benchmarks, e.g.::

    python docs/notes/periodic_heldout.py --optimizers bo gpmin bfgs --jobs 1
"""

import argparse
import sys

from asebo.benchmarks import _materials
from asebo.benchmarks._heldout import periodic_heldout_systems

parser = argparse.ArgumentParser()
_materials.add_arguments(parser)
args = parser.parse_args(sys.argv[1:])
_materials.run(args, periodic_heldout_systems())
