"""The users' regime: GPAW relaxations of molecules and slabs, BOOptimizer's default prior
against the model prior, L-BFGS, Sella and GPMin.

What a user of a DFT code pays for is its calls. BOOptimizer's default
(:func:`asebo.model.default_prior.default_prior`) takes GFN2-xTB as the prior of a
molecule under GPAW, and the pair springs for a slab; this benchmark runs, side by side
in one run, from the same starts:

- ``--set molecules``: ten molecules of 3 to 21 atoms (:data:`MOLECULES`), each from
  its geometry in ASE's G2 collection or one built by RDKit from its SMILES and relaxed
  with GFN2-xTB, every coordinate displaced uniformly in ±0.1 Å; GPAW in LCAO mode
  (PBE, dzp basis, grid spacing 0.2 Å, 3.5 Å of vacuum: :data:`MOLECULE_GPAW`);
  ``bo`` (the default, GFN2-xTB), ``bo+lindh`` (the Lindh model, no prior
  calculator), L-BFGS and Sella (internal coordinates);
- ``--set slabs``: five adsorbates on Cu(111) and Cu(100) of ``asebo bench
  adsorbates`` (:data:`SLABS`, :func:`asebo.benchmarks.adsorbates.adsorbate_systems`,
  its GPAW settings); ``bo`` (the springs), GPMin and L-BFGS.

The table (:func:`asebo.benchmarks._materials.table`) gives the calls of every start,
the totals and their ratios to L-BFGS's and GPMin's, energies above the lowest of a
start, and the time per step outside the calculator, the prior's calls included.
"""

from ase.build import molecule

from asebo.benchmarks import _materials
from asebo.benchmarks._materials import MaterialSystem
from asebo.benchmarks.adsorbates import GPAW_PRESET, adsorbate_systems

MOLECULES = {
    "water": "H2O",
    "ammonia": "NH3",
    "methanol": "CH3OH",
    "acetaldehyde": "CH3CHO",
    "acetic_acid": "CH3COOH",
    "ethanol": "CH3CH2OH",
    "pyridine": "C5H5N",
    "glycerol": "smiles:OCC(O)CO",
    "alanine": "smiles:CC(N)C(=O)O",
    "aspirin": "smiles:CC(=O)Oc1ccccc1C(=O)O",
}
"""The molecules: a G2 name or a SMILES string (3 to 21 atoms)."""

SLABS = ("H_Cu111", "CO_Cu111", "H_Cu100", "O_Cu100", "OH_Cu100")
"""The slabs: systems of ``asebo bench adsorbates`` with a minimum near their start (CO
starts on Cu(100)'s top site, which has none at these settings)."""

MOLECULE_GPAW = "gpaw:mode=lcao,h=0.2,vacuum=3.5"
"""GPAW for the molecules: LCAO (dzp), PBE, grid spacing 0.2 Å, 3.5 Å of vacuum."""

OPTIMIZERS = {"molecules": ["bo", "bo+lindh", "lbfgs", "sella"], "slabs": ["bo", "gpmin", "lbfgs"]}
"""The optimizers of each set by default."""


def molecule_systems(names=None):
    """The molecules of :data:`MOLECULES` (all, or those named), each as a
    :class:`MaterialSystem` with no cell: G2 geometries as they are, SMILES built by
    RDKit and relaxed with GFN2-xTB."""
    systems = []
    for name, spec in MOLECULES.items():
        if names and name not in names:
            continue
        atoms = _built(spec) if spec.startswith("smiles:") else molecule(spec)
        systems.append(MaterialSystem(name, atoms, spec))
    return systems


def _built(smiles):
    """The molecule of ``'smiles:...'`` built by RDKit, relaxed with GFN2-xTB."""
    from ase.optimize import BFGS

    from asebo.campaign import load_molecule
    from calculators import get_calculator

    _, atoms = load_molecule(smiles)
    atoms.calc = get_calculator("gfn2")
    BFGS(atoms, logfile=None).run(fmax=0.01, steps=500)
    atoms.calc = None
    return atoms


def add_arguments(parser):
    _materials.add_arguments(parser, optimizers=None)
    parser.add_argument("--set", choices=sorted(OPTIMIZERS), default="molecules")


def run(args):
    if args.set == "molecules":
        systems, calc = molecule_systems(), MOLECULE_GPAW
    else:
        wanted = [s for s in adsorbate_systems() if s.name in SLABS]
        systems, calc = wanted, GPAW_PRESET
    args.optimizers = args.optimizers or OPTIMIZERS[args.set]
    _materials.run(args, systems, calc=calc)
