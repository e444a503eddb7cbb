"""Large molecules outside ``asebo bench large``: the check that its figures hold.

12 molecules of 50–118 atoms, other kinds than the shipped set's (a macrolide, a
taxane, a bile acid, a wax ester, a tetrasaccharide, a crown ether, two peptides,
an HIV protease inhibitor, vitamin E, a propylene-glycol oligomer, an ethyl ester),
built from SMILES as the set is but with another embedding seed (RDKit ETKDGv3 seed
7, MMFF94), written to a folder and relaxed by ``asebo bench large --dir``, e.g.::

    python docs/notes/large_heldout.py heldout
    OMP_NUM_THREADS=1 asebo bench large --dir heldout --optimizers bo sella geometric
"""

import sys
from pathlib import Path

from ase.io import write
from rdkit import Chem

from asebo.smiles import molecule_from_smiles

SEED = 7

MOLECULES = {
    "ethyl_linoleate": r"CCCCC/C=C\C/C=C\CCCCCCCC(=O)OCC",
    "met_enkephalin": Chem.MolToSmiles(Chem.MolFromSequence("YGGFM")),
    "hexapeptide_agsvld": Chem.MolToSmiles(Chem.MolFromSequence("AGSVLD")),
    "stachyose": "OC[C@H]1O[C@H](OC[C@H]2O[C@H](OC[C@H]3O[C@@H](O[C@]4(CO)O[C@H](CO)"
    "[C@@H](O)[C@@H]4O)[C@H](O)[C@@H](O)[C@H]3O)[C@H](O)[C@@H](O)[C@H]2O)[C@H](O)"
    "[C@@H](O)[C@H]1O",
    "erythromycin": "CC[C@@H]1[C@@]([C@@H]([C@H](C(=O)[C@@H](C[C@@]([C@@H]([C@H]([C@@H]"
    "([C@H](C(=O)O1)C)O[C@H]2C[C@@]([C@H]([C@@H](O2)C)O)(C)OC)C)O[C@H]3[C@@H]([C@H]"
    "(C[C@H](O3)C)N(C)C)O)(C)O)C)C)O)(C)O",
    "ritonavir": "CC(C)c1nc(CN(C)C(=O)N[C@@H](C(C)C)C(=O)N[C@@H](Cc2ccccc2)C[C@H](O)"
    "[C@H](Cc2ccccc2)NC(=O)OCc2cncs2)cs1",
    "cetyl_palmitate": "CCCCCCCCCCCCCCCC(=O)OCCCCCCCCCCCCCCCC",
    "ppg5_dimethyl": "COC(C)COC(C)COC(C)COC(C)COC(C)C",
    "cholic_acid": "C[C@H](CCC(=O)O)[C@H]1CC[C@H]2[C@@H]3[C@@H](O)C[C@@H]4C[C@H](O)CC"
    "[C@]4(C)[C@H]3C[C@H](O)[C@]12C",
    "tocopherol": "Cc1c(C)c2O[C@](C)(CCC[C@H](C)CCC[C@H](C)CCCC(C)C)CCc2c(C)c1O",
    "paclitaxel": "CC(=O)O[C@@H]1C(=O)[C@]2(C)[C@@H](O)C[C@H]3OC[C@@]3(OC(C)=O)[C@H]2"
    "[C@H](OC(=O)c2ccccc2)[C@]2(O)C[C@H](OC(=O)[C@H](O)[C@@H](NC(=O)c3ccccc3)"
    "c3ccccc3)C(C)=C1C2(C)C",
    "dibenzo_18_crown_6": "c1ccc2OCCOCCOc3ccccc3OCCOCCOc2c1",
}

folder = Path(sys.argv[1] if len(sys.argv) > 1 else "heldout")
folder.mkdir(parents=True, exist_ok=True)
for name, smiles in MOLECULES.items():
    atoms = molecule_from_smiles(smiles, random_state=SEED)
    comment = f"{name} {smiles} (RDKit ETKDGv3 seed {SEED}, MMFF94)"
    write(folder / f"{name}.xyz", atoms, comment=comment)
    print(f"{name}: {len(atoms)} atoms")
