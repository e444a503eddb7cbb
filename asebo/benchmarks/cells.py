"""Force calls to relax strained and rattled cells through FrechetCellFilter.

Positions and cell together, through ASE's ``FrechetCellFilter`` (``--filter`` for
another), whose forces carry the virial divided by the number of atoms: ``--fmax``
bounds the atomic forces and the stress times the volume per atom. The EMT set
(``--calc emt``, the default) has the fcc metals Cu, Al, Ni, Pd, Ag, Au and Pt, the
L1₂ alloys Cu3Au, CuAu3 and Ni3Al and the L1₀ alloys CuAu, CuPt and AgAu, in cells
of two cubic fcc cells (8 atoms). The GPAW set (``--calc gpaw``, not run by default)
has diamond Si, fcc Al and rocksalt NaCl and MgO in their cubic cells with coarse
settings: plane waves at 300 eV (600 eV for MgO, whose energy and stress disagree at
300) and 2 or 3 k-points per direction (GPAW gives the stress in plane-wave mode
only; pass ``--calc gpaw:mode=lcao`` to try an atomic basis; options in ``--calc``
override the systems' own). Each start has its cell strained by a random symmetric
strain of components within ±3 % (±2 % with GPAW) and every coordinate displaced
uniformly in ±0.05 Å, with fixed seeds. The optimizers run side by side in one run;
Sella relaxes the cell itself (``optimize_cell=True``) as it takes no filter. The
table is that of ``asebo bench surfaces``.
"""

from ase.build import bulk

from asebo.benchmarks import _materials
from asebo.benchmarks._materials import MaterialSystem

STRAIN = {"emt": 0.03, "gpaw": 0.02}
"""Largest component of the random strain of a start, per calculator."""

AMPLITUDE = 0.05
"""Largest displacement of a coordinate in a start, Å."""

GPAW_PRESET = "gpaw:mode=pw"
"""The GPAW settings of ``--calc gpaw``: coarse plane waves (k-points are per system)."""


def _fcc(symbol, a=None, guest=None, sites=()):
    cell = bulk(symbol, "fcc", a=a, cubic=True)
    symbols = cell.get_chemical_symbols()
    for site in sites:
        symbols[site] = guest
    cell.set_chemical_symbols(symbols)
    return cell.repeat((2, 1, 1))


def emt_cells():
    """The 13 EMT systems of ``asebo bench cells``.

    B2 cells (NiAl, CuPd) are left out: EMT makes them unstable, and the optimizers end
    in different phases.

    Returns
    -------
    list of MaterialSystem
    """
    strain = STRAIN["emt"]
    systems = [
        MaterialSystem(f"{s}_fcc", _fcc(s), f"fcc {s}", AMPLITUDE, strain)
        for s in ("Cu", "Al", "Ni", "Pd", "Ag", "Au", "Pt")
    ]
    alloys = [
        ("Cu3Au_L12", _fcc("Cu", 3.75, "Au", [0]), "L1₂ Cu3Au"),
        ("CuAu3_L12", _fcc("Au", 3.98, "Cu", [0]), "L1₂ CuAu3"),
        ("CuAu_L10", _fcc("Cu", 3.85, "Au", [1, 2]), "L1₀ CuAu"),
        ("Ni3Al_L12", _fcc("Ni", 3.57, "Al", [0]), "L1₂ Ni3Al"),
        ("CuPt_L10", _fcc("Cu", 3.80, "Pt", [1, 2]), "L1₀ CuPt"),
        ("AgAu_L10", _fcc("Ag", 4.08, "Au", [1, 2]), "L1₀ AgAu"),
    ]
    systems += [MaterialSystem(n, a, d, AMPLITUDE, strain) for n, a, d in alloys]
    return systems


def gpaw_cells():
    """The 4 GPAW systems of ``asebo bench cells --calc gpaw``.

    Returns
    -------
    list of MaterialSystem
    """
    strain = STRAIN["gpaw"]
    structures = [
        ("Si_diamond", bulk("Si", "diamond", a=5.43, cubic=True), 2, 300, "diamond Si"),
        ("Al_fcc", bulk("Al", "fcc", a=4.05, cubic=True), 3, 300, "fcc Al"),
        ("NaCl_rocksalt", bulk("NaCl", "rocksalt", a=5.64, cubic=True), 2, 300, "rocksalt NaCl"),
        # at 300 eV GPAW's energy and stress disagree on MgO (the oxygen needs more)
        ("MgO_rocksalt", bulk("MgO", "rocksalt", a=4.21, cubic=True), 2, 600, "rocksalt MgO"),
    ]
    return [
        MaterialSystem(
            name,
            atoms,
            f"{description}, {k}×{k}×{k} k-points, {ecut} eV",
            AMPLITUDE,
            strain,
            {"kpts": (k, k, k), "ecut": ecut},
        )
        for name, atoms, k, ecut, description in structures
    ]


def add_arguments(parser):
    _materials.add_arguments(parser)
    parser.add_argument(
        "--calc",
        default="emt",
        help="'emt' for the EMT set, 'gpaw' for the GPAW set with its coarse settings, or "
        "'gpaw:OPTIONS' for the GPAW set with other preset options",
    )
    parser.add_argument(
        "--filter",
        default="frechet",
        help="ASE's cell filter: frechet (FrechetCellFilter), unitcell, exp or strain",
    )


def run(args):
    from asebo.campaign.relax import CELL_FILTERS

    if args.filter not in CELL_FILTERS:
        raise SystemExit(f"--filter {args.filter!r}: choose among {', '.join(CELL_FILTERS)}")
    name = args.calc.partition(":")[0].strip().lower()
    if name not in ("emt", "gpaw"):
        raise SystemExit(f"--calc {args.calc!r}: choose 'emt' or 'gpaw' (with options)")
    systems = emt_cells() if name == "emt" else gpaw_cells()
    calc = GPAW_PRESET if args.calc.strip().lower() == "gpaw" else args.calc
    _materials.run(args, systems, calc=calc, cell_filter=args.filter)
