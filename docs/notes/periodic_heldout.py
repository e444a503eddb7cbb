"""Periodic systems outside the shipped sets: the check that the periodic defaults hold.

14 EMT systems (28 starts) built with the shipped sets' helpers but from other
elements, facets and defects than ``asebo bench surfaces`` and ``asebo bench bulk``.
Takes the options of those benchmarks, e.g.::

    python docs/notes/periodic_heldout.py --optimizers bo gpmin bfgs --jobs 1
"""

import argparse
import sys

from asebo.benchmarks import _materials
from asebo.benchmarks._materials import MaterialSystem
from asebo.benchmarks.bulk import fcc, solid_solution, with_interstitial, with_vacancy
from asebo.benchmarks.surfaces import adatom, cluster, slab, surface_alloy, vacancy

systems = [
    MaterialSystem("Pt100_adatom", adatom("Pt", "100"), "held out"),
    MaterialSystem("Au111_adatom", adatom("Au", "111"), "held out"),
    MaterialSystem("Cu110_adatom", adatom("Cu", "110"), "held out"),
    MaterialSystem("Au100_vacancy", vacancy("Au", "100"), "held out"),
    MaterialSystem("Pd111_vacancy", vacancy("Pd", "111"), "held out"),
    MaterialSystem("Ni211_step", slab("Ni", "211"), "held out"),
    MaterialSystem("Au3_on_Au111", cluster("Au", "111", 3), "held out"),
    MaterialSystem("AgPd111_alloy", surface_alloy("Ag", "Pd", layer=1, every=2), "held out"),
    MaterialSystem("Cu_on_Ni111", adatom("Ni", "111", "Cu"), "held out"),
    MaterialSystem("Ag_vacancy", with_vacancy(fcc("Ag")), "held out"),
    MaterialSystem("Pd_vacancy", with_vacancy(fcc("Pd")), "held out"),
    MaterialSystem("Ni_interstitial", with_interstitial(fcc("Ni")), "held out"),
    MaterialSystem("Cu_rattled", fcc("Cu"), "held out", amplitude=0.2),
    MaterialSystem("CuNi_random", solid_solution("Cu", "Ni", 3.58, 0.5, seed=3), "held out"),
]
parser = argparse.ArgumentParser()
_materials.add_arguments(parser)
args = parser.parse_args(sys.argv[1:])
_materials.run(args, systems)
