"""Nudged elastic bands: BONEB against ASE's NEB with FIRE, BFGS and MDMin.

``--set emt`` (the default): three surface and bulk hops with EMT: Au on Al(100) from
one hollow site to the next (ASE's NEB tutorial, the two lower layers held), a Pt
adatom on Pt(111) from the fcc to the hcp hollow (the lowest layer held), and a vacancy
hop in a 2x2x2 cubic Cu cell. The endpoints are relaxed first (BFGS, fmax 0.01 eV/Å);
the moving images come from IDPP (ASE's ``interpolate('idpp')``) and are the same for
every optimizer; every band takes the climbing image and ASE's ``improvedtangent``
method, fmax 0.05 eV/Å. The table gives the calls of the moving images' calculators,
whether the band converged, and the barrier (the highest image above the first
endpoint).

``--set reactions``: reactions of Birkholz and Schlegel's path test set with GFN2-xTB
(tblite), shipped in ``asebo/data/reactions`` or read from ``--reactions-dir`` (each
file: reactant, approximate transition state, product), each with its charge (``18_sn2``
an anion) and a doublet where its electrons are odd (``15_oxirane``); the end states are
relaxed with BFGS to 0.01 eV/Å (where they relax to one minimum, the command says so:
that band is no reaction) and the band has 5 moving images by IDPP, as for the EMT hops.

``--set gpaw``: one surface hop with GPAW in LCAO mode (PBE): an Al adatom on Al(100),
a 2x2 surface cell of two layers held at the bulk positions (the adatom alone moves),
from a hollow site over the bridge to the next hollow. GPAW takes the single-zeta part
of the dzp basis and a grid spacing of 0.25 Å (where its forces are still the gradient
of its energy), 3x3x1 Γ-centred k-points and 0.1 eV of Fermi-Dirac smearing: about
8 s a call on one core, and a barrier of this coarse model, not a converged one.
Endpoints relaxed with BFGS to 0.01 eV/Å, 3 moving images by IDPP, as for the EMT
hops.

``--calculator`` runs the reactions' bands and end states with another calculator
preset (``gpaw:mode=lcao,basis=dzp,h=0.2,vacuum=4``, say); under any calculator but
tblite BONEB's default prior of a molecule's band is GFN2-xTB. GPAW puts each image in
a box; every image of a band, its endpoints included, takes the one box that holds
the whole IDPP band with the preset's vacuum (:func:`one_box`), and the endpoints,
relaxed each in its own box, are computed again in it.

``--optimizers`` runs some of BONEB, FIRE, BFGS and MDMin only, in the table's order
(default: all four). ``--prior gfn1`` gives BONEB GFN1-xTB as its prior (the GP learns
the difference to it; its calls are not counted): what a GFN-xTB prior does for a band
computed with an expensive method; ``--prior max`` the highest energy computed. The
table ends with the wall time of each optimizer over all bands.
"""

import time
from functools import partial
from pathlib import Path

import numpy as np
from ase.build import add_adsorbate, bulk, fcc100, fcc111, minimize_rotation_and_translation
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.io import read
from ase.mep import NEB
from ase.optimize import BFGS, FIRE, MDMin

from asebo.benchmarks._charges import with_charge
from asebo.benchmarks._options import (
    positive_float,
    positive_int,
    refuse_missing,
    refuse_unknown,
)

OPTIMIZERS = ("BONEB", "FIRE", "BFGS", "MDMin")
GPAW_PRESET = "gpaw:basis=sz(dzp),h=0.25"
"""GPAW in LCAO mode, single-zeta basis, grid spacing 0.25 Å (the test suite's preset)."""
GPAW_KPTS = (3, 3, 1)
"""The k-points of the GPAW hop's 2x2 surface cell."""
SAME_STATE = 0.05
"""Å: end states this close (RMSD) are one minimum, and their band no reaction."""
REACTIONS = Path(__file__).resolve().parent.parent / "data" / "reactions"
"""The reactions of Birkholz and Schlegel's path test set shipped with asebo."""


def add_arguments(parser):
    parser.add_argument(
        "--set", choices=("emt", "reactions", "gpaw"), default="emt", help="which bands"
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=sorted(SYSTEMS),
        default=sorted(SYSTEMS),
        help="the EMT hops to run",
    )
    parser.add_argument(
        "--reactions-dir",
        default=REACTIONS,
        help="folder of the reactions' .xyz files (--set reactions; default: those shipped)",
    )
    parser.add_argument(
        "--reactions",
        nargs="+",
        default=[
            "02_hcn",
            "11_h2co",
            "12_hf_eth",
            "14_meoh",
            "00_c2no2",
            "01_c5ht",
            "04_cpht",
            "05_cycbut",
        ],
        help="the reactions to run (file names without .xyz)",
    )
    parser.add_argument(
        "--optimizers",
        nargs="+",
        choices=OPTIMIZERS,
        default=list(OPTIMIZERS),
        help="the optimizers to compare, in the table's order (default: all four)",
    )
    parser.add_argument("--fmax", type=positive_float, default=0.05, help="eV/Å, on the NEB forces")
    parser.add_argument(
        "--steps", type=positive_int, default=1000, help="optimizer steps (BONEB: calls) at most"
    )
    parser.add_argument(
        "--calculator",
        default="gfn2",
        help="the calculator preset of the reactions' bands and end states (--set "
        "reactions), 'gpaw:mode=lcao,basis=dzp' say; default: gfn2",
    )
    parser.add_argument(
        "--prior",
        default=None,
        help="BONEB's prior: a calculator preset (gfn1, say; its calls are not counted) or "
        "a model prior ('max'); default: BONEB's own",
    )


class Counted(Calculator):
    """A calculator that counts the calls of the one it wraps."""

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, calc):
        super().__init__()
        self.calc, self.calls = calc, 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.calls += 1
        energy = self.calc.get_potential_energy(self.atoms)
        forces = self.calc.get_forces(self.atoms)
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}


def _relaxed(atoms, make=EMT):
    atoms.calc = make()
    BFGS(atoms, logfile=None).run(fmax=0.01, steps=1000)
    return atoms


def au_on_al100():
    """Au on Al(100), hollow to hollow: (initial, final, moving images)."""
    slab = fcc100("Al", size=(2, 2, 3))
    add_adsorbate(slab, "Au", 1.7, "hollow")
    slab.center(axis=2, vacuum=4.0)
    slab.set_constraint(FixAtoms(mask=[atom.tag > 1 for atom in slab]))
    final = slab.copy()
    final[-1].x += final.get_cell()[0, 0] / 2
    return _relaxed(slab), _relaxed(final), 3


def pt_on_pt111():
    """A Pt adatom on Pt(111), fcc to hcp hollow: (initial, final, moving images)."""
    ends = []
    for site in ("fcc", "hcp"):
        slab = fcc111("Pt", size=(3, 3, 3), vacuum=6.0)
        add_adsorbate(slab, "Pt", 1.9, site)
        slab.set_constraint(FixAtoms(mask=[atom.tag == 3 for atom in slab]))
        ends.append(_relaxed(slab))
    return ends[0], ends[1], 5


def cu_vacancy():
    """A vacancy hop to a nearest site in cubic Cu (2x2x2): (initial, final, moving)."""
    crystal = bulk("Cu", cubic=True).repeat((2, 2, 2))
    vacancy = crystal.positions[0].copy()
    del crystal[0]
    distances = np.linalg.norm(crystal.positions - vacancy, axis=1)
    hopping = int(np.argmin(distances))
    final = crystal.copy()
    final.positions[hopping] = vacancy
    return _relaxed(crystal), _relaxed(final), 5


def lcao_gpaw(kpts=GPAW_KPTS):
    """GPAW in LCAO mode with :data:`GPAW_PRESET` and ``kpts``."""
    from calculators import get_calculator

    return get_calculator(GPAW_PRESET, kpts=kpts)


def al_on_al100(size=(2, 2), make=lcao_gpaw):
    """An Al adatom on Al(100), hollow to the next hollow: (initial, final, moving).

    Parameters
    ----------
    size : tuple of 2 int
        Al atoms per layer along x and y; two layers, both held (the adatom alone
        moves), 4 Å of vacuum on either side. At least 2 along x: the two hollows are
        one surface spacing apart along x, the same site in a cell one atom wide.
    make : callable
        Makes the calculator of the endpoints' relaxations.

    Returns
    -------
    tuple of (ase.Atoms, ase.Atoms, int)
        The relaxed endpoints and the number of moving images, 3.
    """
    if size[0] < 2:
        raise ValueError(f"size {size}: the cell needs two Al atoms along x at least")
    ends = []
    for hollow in (0.5, 1.5):  # surface spacings along x from a top-layer atom
        slab = fcc100("Al", size=(*size, 2), a=4.05)
        top = slab.positions[slab.get_tags() == 1][0]
        spacing = slab.cell[0, 0] / size[0]  # Å, between neighbouring surface atoms
        slab.append("Al")
        slab.positions[-1] = top + [spacing * hollow, spacing / 2, 1.9]
        slab.center(axis=2, vacuum=4.0)
        slab.set_constraint(FixAtoms(mask=slab.get_tags() > 0))  # the slab, not the adatom
        ends.append(_relaxed(slab, make))
    return ends[0], ends[1], 3


SYSTEMS = {
    "au_al100": au_on_al100,
    "pt_pt111": pt_on_pt111,
    "cu_vacancy": cu_vacancy,
}
"""The hops of the benchmark: name, then the function that builds its endpoints."""


def idpp_band(initial, final, moving):
    """The positions (moving + 2, n, 3) of the IDPP band between the endpoints."""
    images = [initial.copy() for _ in range(moving + 1)] + [final.copy()]
    from asebo.barrier.band_setup import interpolate

    neb = NEB(images, method="improvedtangent")
    interpolate(neb, "idpp")
    return np.array([image.positions for image in images])


def end_state_rmsd(initial, final):
    """Root-mean-square distance (Å) of ``final`` to ``initial``, aligned by rotation and
    translation where neither is periodic."""
    moved = final.copy()
    if not (initial.pbc.any() or final.pbc.any()):
        minimize_rotation_and_translation(initial, moved)
    return float(np.sqrt(((moved.positions - initial.positions) ** 2).sum(axis=1).mean()))


def band(initial, final, positions, make=EMT):
    """A climbing-image NEB at ``positions``, ``make()`` on every image (counted on the
    moving ones)."""
    images = []
    for index, where in enumerate(positions):
        image = (final if index == len(positions) - 1 else initial).copy()
        image.positions = where
        image.calc = make() if index in (0, len(positions) - 1) else Counted(make())
        images.append(image)
    return NEB(images, climb=True, method="improvedtangent")


def one_box(make, positions):
    """``make``, or where it makes a calculator that puts a molecule in a box of its own
    (GPAW's preset: :class:`calculators.box.MoleculeBoxCalculator`), ``make`` with one box
    for every image of the band at ``positions`` (i, n, 3)
    (:func:`calculators.box.band_box`): each image's own box would be its own energy
    surface."""
    options = getattr(make(), "options", None)
    if not isinstance(options, dict) or "box" not in options:
        return make
    from calculators.box import band_box

    return partial(make, box=band_box(positions, options["vacuum"]))


def gfn2():
    from calculators import get_calculator

    return get_calculator("gfn2")


def reaction(path, make=gfn2):
    """The end states of a reaction file relaxed with ``make()``: (initial, final, moving).

    A reaction of :data:`asebo.benchmarks._charges.CHARGES` takes its charge, and one of
    an odd number of electrons is a doublet (:func:`asebo.benchmarks._charges.with_charge`).
    """
    path = Path(path)
    frames = [with_charge(frame, path.stem) for frame in read(path, index=":")]
    return _relaxed(frames[0], make), _relaxed(frames[-1], make), 5


def run_optimizer(name, neb, fmax, steps, prior=None):
    """Optimize ``neb`` with ``name``: (calls of the moving images, converged, barrier);
    an optimizer stopped by a calculator's error is not converged. ``prior``: BONEB's
    prior, a calculator preset or a model prior's name
    (:func:`asebo.model.priors.resolve_prior`), or None for BONEB's default."""
    try:
        if name == "BONEB":
            from asebo.model.priors import resolve_prior
            from asebo.neb import BONEB

            converged = BONEB(neb, logfile=None, prior=resolve_prior(prior)).run(
                fmax=fmax, steps=steps
            )
        else:
            optimizer = {"FIRE": FIRE, "BFGS": BFGS, "MDMin": MDMin}[name]
            converged = optimizer(neb, logfile=None).run(fmax=fmax, steps=steps)
        energies = [image.get_potential_energy() for image in neb.images]
        barrier = max(energies) - energies[0]
    except Exception as error:  # an SCF that does not converge: reported, not raised
        print(f"{name}: stopped by {type(error).__name__}: {str(error)[:120]}")
        converged, barrier = False, float("nan")
    calls = sum(image.calc.calls for image in neb.images[1:-1])
    return calls, bool(converged), barrier


def _cell(result):
    calls, converged, barrier = result
    return f"{calls} ({barrier:.3f} eV)" if converged else f"{calls}, not converged"


def _cases(args):
    """(name, endpoints builder, calculator maker) of each band of ``args``."""
    if args.set == "emt":
        return [(name, SYSTEMS[name], EMT) for name in args.systems]
    if args.set == "gpaw":
        return [("al_al100", al_on_al100, lcao_gpaw)]
    from calculators import get_calculator

    folder = Path(args.reactions_dir)
    make = partial(get_calculator, args.calculator)
    return [
        (name, partial(reaction, folder / f"{name}.xyz", make), make) for name in args.reactions
    ]


def run(args):
    from asebo.model.priors import resolve_prior
    from calculators import get_calculator

    reactions = args.calculator if args.set == "reactions" else None
    refuse_unknown(  # before any band
        "asebo bench neb",
        [("--prior", resolve_prior, args.prior), ("--calculator", get_calculator, reactions)],
    )
    if args.set == "reactions":
        refuse_missing("asebo bench neb", args.reactions_dir, args.reactions)
    optimizers = list(dict.fromkeys(args.optimizers))
    rows = []
    calls, seconds = dict.fromkeys(optimizers, 0), dict.fromkeys(optimizers, 0.0)
    for name, build, relax in _cases(args):
        initial, final, moving = build()
        apart = end_state_rmsd(initial, final)
        if apart < SAME_STATE:
            print(f"{name}: its end states relax to one minimum (RMSD {apart:.3f} Å)")
        positions = idpp_band(initial, final, moving)
        make = one_box(relax, positions) if args.set == "reactions" else relax
        cells = []
        for optimizer in optimizers:
            start = time.perf_counter()
            neb = band(initial, final, positions, make)
            result = run_optimizer(optimizer, neb, args.fmax, args.steps, args.prior)
            elapsed = time.perf_counter() - start
            print(f"{name} {optimizer}: {_cell(result)}, {elapsed:.1f} s", flush=True)
            calls[optimizer] += result[0]
            seconds[optimizer] += elapsed
            cells.append(_cell(result))
        rows.append(f"| {name} ({moving} images) | " + " | ".join(cells) + " |")
    print()
    print("| band | " + " | ".join(optimizers) + " |")
    print("|---|" + "---|" * len(optimizers))
    print("\n".join(rows))
    print("| **calls in all** | " + " | ".join(str(calls[o]) for o in optimizers) + " |")
    print("| **wall time** | " + " | ".join(f"{seconds[o]:.0f} s" for o in optimizers) + " |")
