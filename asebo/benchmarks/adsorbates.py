"""Force calls to relax H, O, OH and CO on Cu(111) and Cu(100) with GPAW (LCAO).

Eight adsorbate systems: each adsorbate on a 2 × 2 Cu slab of three layers built with
``ase.build`` (PBE lattice constant 3.63 Å, 5 Å of vacuum on each side, the bottom
layer fixed; 12 Cu atoms, 8 of them free), H, O and OH (O down) in the fcc site of
(111) and the hollow site of (100), CO (C down) on top of a Cu atom. The adsorbate is
placed where a user would first put it, at one height per adsorbate for both facets
(:data:`HEIGHTS`), and every free coordinate of a start is displaced uniformly in
±0.1 Å with a fixed seed. The default calculator (``--calc gpaw``) is GPAW in LCAO
mode with coarse settings, :data:`GPAW_PRESET`: PBE, the single-zeta part of the dzp
basis, grid spacing 0.2 Å, 3 × 3 × 1 k-points, Fermi-Dirac smearing of 0.1 eV
(about 10 s a force call on one core). At 0.25 Å the grid's egg-box ripple moves the
energy of H in the fcc site by 0.09 eV over 0.04 Å (forces of 2.5 eV/Å where they are
0.1 at 0.2 Å): no optimizer should be judged on that. ``--calc emt`` takes ASE's EMT instead, whose
parameters for H, C and O are rough, for a check in seconds; ``--calc gpaw:OPTIONS``
changes the GPAW settings. The optimizers run side by side in one run; the table is
that of ``asebo bench surfaces``.
"""

from ase import Atoms
from ase.build import add_adsorbate, fcc100, fcc111
from ase.constraints import FixAtoms

from asebo.benchmarks import _materials
from asebo.benchmarks._materials import MaterialSystem

LATTICE = 3.63
"""Cu lattice constant, Å (PBE)."""

VACUUM = 5.0
"""Å of vacuum on each side of a slab."""

HEIGHTS = {"H": 1.0, "O": 1.2, "OH": 1.4, "CO": 1.9}
"""Height of the adsorbate's bonding atom above the top layer in a start, Å."""

ADSORBATES = {
    "H": Atoms("H"),
    "O": Atoms("O"),
    "OH": Atoms("OH", positions=[(0.0, 0.0, 0.0), (0.0, 0.0, 0.97)]),
    "CO": Atoms("CO", positions=[(0.0, 0.0, 0.0), (0.0, 0.0, 1.15)]),
}
"""Each adsorbate with its bonding atom first, pointing up."""

SITES = {("111", "CO"): "ontop", ("100", "CO"): "ontop", "111": "fcc", "100": "hollow"}
"""The site of each adsorbate on each facet."""

GPAW_PRESET = "gpaw:mode=lcao,basis=sz(dzp),h=0.2,kpts=(3,3,1)"
"""The GPAW settings of ``--calc gpaw``."""


def adsorbate_on_copper(adsorbate, facet):
    """``adsorbate`` on a 2 × 2 × 3 Cu slab, the bottom layer fixed.

    Parameters
    ----------
    adsorbate : {'H', 'O', 'OH', 'CO'}
    facet : {'111', '100'}

    Returns
    -------
    ase.Atoms
        Periodic along the surface, ``pbc=(True, True, False)``.
    """
    build = {"111": fcc111, "100": fcc100}[facet]
    atoms = build("Cu", (2, 2, 3), a=LATTICE, vacuum=VACUUM)
    site = SITES.get((facet, adsorbate), SITES[facet])
    add_adsorbate(atoms, ADSORBATES[adsorbate].copy(), HEIGHTS[adsorbate], site)
    atoms.center(vacuum=VACUUM, axis=2)
    atoms.set_constraint(FixAtoms(indices=[atom.index for atom in atoms if atom.tag == 3]))
    return atoms


def adsorbate_systems():
    """The 8 systems of ``asebo bench adsorbates``, in the order of the table.

    Returns
    -------
    list of MaterialSystem
    """
    return [
        MaterialSystem(
            f"{adsorbate}_Cu{facet}",
            adsorbate_on_copper(adsorbate, facet),
            f"{adsorbate} in the {SITES.get((facet, adsorbate), SITES[facet])} site of "
            f"Cu({facet}), 2×2×3",
        )
        for facet in ("111", "100")
        for adsorbate in ADSORBATES
    ]


def add_arguments(parser):
    _materials.add_arguments(parser, optimizers=["bo", "bfgs", "gpmin"])
    parser.add_argument(
        "--calc",
        default="gpaw",
        help="'gpaw' for GPAW with the coarse settings above, 'gpaw:OPTIONS' for other "
        "preset options, or 'emt' for ASE's EMT",
    )


def run(args):
    name = args.calc.partition(":")[0].strip().lower()
    if name not in ("emt", "gpaw"):
        raise SystemExit(f"--calc {args.calc!r}: choose 'emt' or 'gpaw' (with options)")
    calc = GPAW_PRESET if args.calc.strip().lower() == "gpaw" else args.calc
    _materials.run(args, adsorbate_systems(), calc=calc)
