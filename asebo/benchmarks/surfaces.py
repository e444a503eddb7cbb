"""Force calls to relax 24 metal surfaces with EMT: BOOptimizer against ASE's optimizers.

Adatoms, vacancies, steps, small clusters and alloys on fcc(111), (100), (110) and
(211) slabs of Cu, Ag, Au, Pt, Pd, Ni and Al built with ``ase.build`` (four layers,
6 Å of vacuum on each side, the bottom two layers fixed; 35 to 40 atoms), with ASE's
effective-medium theory (K. W. Jacobsen, P. Stoltze, J. K. Nørskov, Surf. Sci. 366,
394 (1996)). Each system is relaxed from ``--starts`` starts, every free coordinate
displaced uniformly in ±0.1 Å with a fixed seed, by each optimizer to ``--fmax``, side
by side in one run: the table gives the force calls, the totals, the ratios to GPMin's
and BFGS's totals, failures, and final energies more than 0.01 eV above the lowest any
optimizer found from the same start. Sella, which runs in Cartesian coordinates on
periodic systems, needs ``pip install 'asebo[sella]'``.
"""

import numpy as np
from ase.build import add_adsorbate, fcc100, fcc110, fcc111, fcc211

from asebo.benchmarks import _materials
from asebo.benchmarks._materials import MaterialSystem, fix_bottom_half

SIZE = (3, 3, 4)
"""Surface cells of 3 × 3 atoms, four layers."""

VACUUM = 6.0
"""Å of vacuum on each side of a slab."""

FACETS = {"111": fcc111, "100": fcc100, "110": fcc110, "211": fcc211}
SITES = {"111": "fcc", "100": "hollow", "110": "hollow"}
"""The site of an adatom on each facet (hollow sites: four neighbours or more)."""


def slab(symbol, facet, a=None):
    """A four-layer slab of ``symbol`` with the bottom two layers fixed.

    Parameters
    ----------
    symbol : str
    facet : {'111', '100', '110', '211'}
    a : float, optional
        Lattice constant, Å (ASE's reference value of ``symbol`` by default).

    Returns
    -------
    ase.Atoms
    """
    atoms = FACETS[facet](symbol, SIZE, a=a, vacuum=VACUUM)
    return fix_bottom_half(atoms)


def _layer_spacing(atoms):
    """The distance between the top two layers of a slab from ``ase.build``, Å."""
    tags = atoms.get_tags()
    z = atoms.positions[:, 2]
    return float(z[tags == 1].mean() - z[tags == 2].mean())


def adatom(symbol, facet, adsorbate=None, position=None):
    """A slab of ``symbol`` with one ``adsorbate`` atom (``symbol`` by default) in a hollow."""
    atoms = slab(symbol, facet)
    add_adsorbate(atoms, adsorbate or symbol, _layer_spacing(atoms), position or SITES[facet])
    return atoms


def vacancy(symbol, facet):
    """A slab of ``symbol`` without one atom of its top layer."""
    atoms = slab(symbol, facet)
    del atoms[int(np.flatnonzero(atoms.get_tags() == 1)[0])]
    return atoms


def cluster(symbol, facet, size):
    """A slab of ``symbol`` with a compact cluster of ``size`` atoms in neighbouring hollows.

    On (111): a triangle of three fcc sites, and for four atoms one more atom above its
    centre (a tetrahedron). On (100): a square of four hollow sites.
    """
    atoms = slab(symbol, facet)
    height = _layer_spacing(atoms)
    offsets = {"111": [(0, 0), (1, 0), (0, 1)], "100": [(0, 0), (1, 0), (0, 1), (1, 1)]}[facet]
    for offset in offsets[:size]:
        add_adsorbate(atoms, symbol, height, SITES[facet], offset=offset)
    if size > len(offsets):
        base = atoms.positions[-len(offsets) :]  # (3, 3)
        side = np.linalg.norm(base[1] - base[0])
        top = base.mean(axis=0) + [0.0, 0.0, side * np.sqrt(2.0 / 3.0)]
        add_adsorbate(atoms, symbol, height + side * np.sqrt(2.0 / 3.0), top[:2])
    return atoms


def surface_alloy(host, guest, layer, every=1):
    """A (111) slab of ``host`` with ``guest`` on every ``every``-th site of ``layer``.

    ``layer`` counts from the top (1); the guest atoms keep the host's lattice.
    """
    atoms = slab(host, "111")
    sites = np.flatnonzero(atoms.get_tags() == layer)[::every]
    symbols = atoms.get_chemical_symbols()
    for index in sites:
        symbols[index] = guest
    atoms.set_chemical_symbols(symbols)
    return atoms


def surface_systems():
    """The 24 systems of ``asebo bench surfaces``, in the order of the table.

    Returns
    -------
    list of MaterialSystem
    """
    systems = []
    for symbol, facet in [
        ("Cu", "111"),
        ("Ag", "111"),
        ("Pt", "111"),
        ("Au", "100"),
        ("Ni", "100"),
        ("Pd", "110"),
        ("Al", "110"),
    ]:
        systems.append(
            MaterialSystem(
                f"{symbol}{facet}_adatom",
                adatom(symbol, facet),
                f"{symbol} adatom in the {SITES[facet]} site of {symbol}({facet})",
            )
        )
    for symbol, facet in [
        ("Cu", "100"),
        ("Pt", "111"),
        ("Ag", "110"),
        ("Ni", "111"),
        ("Al", "111"),
    ]:
        systems.append(
            MaterialSystem(
                f"{symbol}{facet}_vacancy",
                vacancy(symbol, facet),
                f"{symbol}({facet}) without one atom of its top layer",
            )
        )
    for symbol in ("Cu", "Pt", "Au", "Ag"):
        systems.append(
            MaterialSystem(f"{symbol}211_step", slab(symbol, "211"), f"stepped {symbol}(211)")
        )
    for symbol, facet, size in [
        ("Cu", "111", 3),
        ("Pd", "111", 3),
        ("Pt", "111", 4),
        ("Ag", "100", 4),
    ]:
        shape = {3: "triangle", 4: "tetrahedron" if facet == "111" else "square"}[size]
        systems.append(
            MaterialSystem(
                f"{symbol}{size}_on_{symbol}{facet}",
                cluster(symbol, facet, size),
                f"{symbol}{size} {shape} on {symbol}({facet})",
            )
        )
    systems += [
        MaterialSystem(
            "CuAu111_alloy",
            surface_alloy("Cu", "Au", layer=1, every=2),
            "Cu(111) with Au on every other site of the top layer",
        ),
        MaterialSystem(
            "PtNi111_skin",
            surface_alloy("Pt", "Ni", layer=2),
            "Pt(111) over a layer of Ni (a Pt skin)",
        ),
        MaterialSystem(
            "Au_on_Cu100", adatom("Cu", "100", "Au"), "Au adatom in the hollow site of Cu(100)"
        ),
        MaterialSystem(
            "Ni_on_Pt111", adatom("Pt", "111", "Ni"), "Ni adatom in the fcc site of Pt(111)"
        ),
    ]
    return systems


def add_arguments(parser):
    _materials.add_arguments(parser)


def run(args):
    _materials.run(args, surface_systems())
