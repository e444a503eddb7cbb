"""Small and mid-sized molecules outside the shipped sets: the check that the endpoint
audit's figures hold.

32 molecules of 5–40 atoms, chosen for what leaves saddle points and higher minima:
methyl and amino rotors, pyramidal and planar nitrogens, amides, hydrogen-bond
donors, ring puckers, biaryl and aryl-ether twists. Built from SMILES as the
drug-like sets are but with another embedding seed (RDKit ETKDGv3 seed 11, MMFF94),
written to a folder, each start rattled by a second argument if given
(``atoms.rattle(stdev, seed=0)``), and relaxed with the endpoint audit (the target's
finite-difference Hessian at every endpoint), e.g.::

    python docs/notes/minima_heldout.py minima_heldout
    python docs/notes/minima_heldout.py minima_rattled 0.1
    OMP_NUM_THREADS=1 asebo bench baker --dir minima_heldout \
        --optimizers bo lbfgs sella --audit
    OMP_NUM_THREADS=1 asebo bench vibrations --dir minima_heldout
"""

import sys
from pathlib import Path

from ase.io import write

from asebo.smiles import molecule_from_smiles

SEED = 11

MOLECULES = {
    "dimethylamine": "CNC",
    "trimethylamine": "CN(C)C",
    "hydrazine": "NN",
    "hydroxylamine": "NO",
    "aniline": "Nc1ccccc1",
    "formamide": "NC=O",
    "urea": "NC(N)=O",
    "n_methylacetamide": "CNC(C)=O",
    "dimethylformamide": "CN(C)C=O",
    "acetic_acid": "CC(=O)O",
    "methyl_acetate": "CC(=O)OC",
    "propanal": "CCC=O",
    "tert_butanol": "CC(C)(C)O",
    "ethylene_glycol": "OCCO",
    "trifluoroethanol": "OCC(F)(F)F",
    "diethyl_ether": "CCOCC",
    "nitromethane": "C[N+](=O)[O-]",
    "dimethyl_sulfoxide": "CS(C)=O",
    "toluene": "Cc1ccccc1",
    "anisole": "COc1ccccc1",
    "thiophenol": "Sc1ccccc1",
    "benzyl_alcohol": "OCc1ccccc1",
    "biphenyl": "c1ccc(cc1)-c1ccccc1",
    "tetrahydrofuran": "C1CCOC1",
    "cyclohexanol": "OC1CCCCC1",
    "morpholine": "C1COCCN1",
    "proline": "OC(=O)C1CCCN1",
    "glycine": "NCC(=O)O",
    "alanine_dipeptide": "CC(=O)NC(C)C(=O)NC",
    "acetanilide": "CC(=O)Nc1ccccc1",
    "phenacetin": "CCOc1ccc(NC(C)=O)cc1",
    "diphenhydramine": "CN(C)CCOC(c1ccccc1)c1ccccc1",
}

folder = Path(sys.argv[1] if len(sys.argv) > 1 else "minima_heldout")
rattle = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
folder.mkdir(parents=True, exist_ok=True)
for name, smiles in MOLECULES.items():
    atoms = molecule_from_smiles(smiles, random_state=SEED)
    comment = f"{name} {smiles} (RDKit ETKDGv3 seed {SEED}, MMFF94)"
    if rattle:
        atoms.rattle(rattle, seed=0)
        comment += f", rattled {rattle} Å (seed 0)"
    write(folder / f"{name}.xyz", atoms, comment=comment)
    print(f"{name}: {len(atoms)} atoms")
