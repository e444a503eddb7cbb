"""Force calls to relax 12 defective and rattled bulk metals and alloys with EMT.

Supercells of 2 × 2 × 2 cubic fcc cells (31 to 33 atoms) built with ``ase.build``: a
vacancy in Cu, Al, Ni and Pt, an octahedral interstitial in Cu and Pd, perfect Au
and Ag displaced twice as far, and the alloys Cu3Au (L1₂, with a vacancy), CuAu
(L1₀), Ni3Al (L1₂, with an antisite pair) and a random PtNi solid solution, with
ASE's effective-medium theory at fixed cell. Each system is relaxed from ``--starts``
starts (every coordinate displaced uniformly in ±0.1 Å, ±0.2 Å for the perfect
crystals, with a fixed seed) by each optimizer to ``--fmax``, side by side in one run,
and printed in the table of ``asebo bench surfaces``.
"""

import numpy as np
from ase.build import bulk

from asebo.benchmarks import _materials
from asebo.benchmarks._materials import MaterialSystem

REPEAT = (2, 2, 2)
"""Cubic fcc cells per supercell (32 sites)."""

ALLOY_LATTICE = {"Cu3Au": 3.75, "CuAu": 3.85, "Ni3Al": 3.57, "PtNi": 3.72}
"""Cubic lattice constants of the alloys, Å (experimental; Vegard's law for PtNi)."""


def fcc(symbol, a=None):
    """A 32-atom supercell of the cubic fcc cell of ``symbol``."""
    return bulk(symbol, "fcc", a=a, cubic=True).repeat(REPEAT)


def ordered(host, guest, a, sites):
    """An ordered fcc alloy: ``guest`` on the ``sites`` (indices 0-3) of each cubic cell.

    Sites 0, 1, 2, 3 of ASE's cubic fcc cell sit at (0, 0, 0), (0, ½, ½), (½, 0, ½),
    (½, ½, 0): site 0 gives L1₂ (``host``₃``guest``), sites 1 and 2 give L1₀.
    """
    cell = bulk(host, "fcc", a=a, cubic=True)
    symbols = cell.get_chemical_symbols()
    for site in sites:
        symbols[site] = guest
    cell.set_chemical_symbols(symbols)
    return cell.repeat(REPEAT)


def with_vacancy(atoms):
    """``atoms`` without its first atom."""
    del atoms[0]
    return atoms


def with_interstitial(atoms):
    """``atoms`` with one more of its first atom's element in an octahedral site."""
    a = atoms.cell.lengths()[0] / REPEAT[0]
    atoms.append(atoms[0].symbol)
    atoms.positions[-1] = [a / 2, a / 2, a / 2]
    return atoms


def with_antisite(atoms):
    """``atoms`` with its first atom's element swapped with the nearest other element."""
    symbols = atoms.get_chemical_symbols()
    others = [i for i, s in enumerate(symbols) if s != symbols[0]]
    nearest = min(others, key=lambda i: atoms.get_distance(0, i, mic=True))
    symbols[0], symbols[nearest] = symbols[nearest], symbols[0]
    atoms.set_chemical_symbols(symbols)
    return atoms


def solid_solution(host, guest, a, fraction, seed=0):
    """A random fcc ``host``-``guest`` alloy with a fixed seed, ``fraction`` of guest atoms."""
    atoms = fcc(host, a)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(atoms), size=round(fraction * len(atoms)), replace=False)
    symbols = np.array(atoms.get_chemical_symbols(), dtype=object)
    symbols[chosen] = guest
    atoms.set_chemical_symbols(list(symbols))
    return atoms


def bulk_systems():
    """The 12 systems of ``asebo bench bulk``, in the order of the table.

    Returns
    -------
    list of MaterialSystem
    """
    systems = [
        MaterialSystem(f"{s}_vacancy", with_vacancy(fcc(s)), f"fcc {s} with a vacancy")
        for s in ("Cu", "Al", "Ni", "Pt")
    ]
    systems += [
        MaterialSystem(
            f"{s}_interstitial",
            with_interstitial(fcc(s)),
            f"fcc {s} with an octahedral interstitial",
        )
        for s in ("Cu", "Pd")
    ]
    systems += [
        MaterialSystem(f"{s}_rattled", fcc(s), f"perfect fcc {s}, rattled ±0.2 Å", amplitude=0.2)
        for s in ("Au", "Ag")
    ]
    a = ALLOY_LATTICE
    systems += [
        MaterialSystem(
            "Cu3Au_vacancy",
            with_vacancy(ordered("Cu", "Au", a["Cu3Au"], [0])),
            "L1₂ Cu3Au with a vacancy on the Au sublattice",
        ),
        MaterialSystem(
            "CuAu_L10", ordered("Cu", "Au", a["CuAu"], [1, 2]), "L1₀ CuAu in a cubic cell"
        ),
        MaterialSystem(
            "Ni3Al_antisite",
            with_antisite(ordered("Ni", "Al", a["Ni3Al"], [0])),
            "L1₂ Ni3Al with an Al-Ni antisite pair",
        ),
        MaterialSystem(
            "PtNi_random",
            solid_solution("Pt", "Ni", a["PtNi"], 0.5),
            "random fcc Pt-Ni, half Ni",
        ),
    ]
    return systems


def add_arguments(parser):
    _materials.add_arguments(parser)


def run(args):
    _materials.run(args, bulk_systems())
