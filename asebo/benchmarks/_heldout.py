"""Periodic systems outside the shipped sets, for the check that the periodic defaults
and each special-case rule hold where no choice was made: 14 EMT systems built with the
shipped sets' helpers from other elements, facets and defects than ``asebo bench
surfaces`` and ``asebo bench bulk``."""

from asebo.benchmarks._materials import MaterialSystem
from asebo.benchmarks.bulk import fcc, solid_solution, with_interstitial, with_vacancy
from asebo.benchmarks.surfaces import adatom, cluster, slab, surface_alloy, vacancy


def periodic_heldout_systems():
    """The 14 held-out periodic systems.

    Returns
    -------
    list of MaterialSystem
    """
    return [
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
