"""Large molecules outside ``asebo bench large``: the check that its figures hold.

Two sets of 12, other kinds than the shipped set's, built from SMILES as the set is
but with other embedding seeds (RDKit ETKDGv3, MMFF94), written to a folder and
relaxed by ``asebo bench large --dir``:

- ``first`` (seed 7), 50–118 atoms: a macrolide, a taxane, a bile acid, a wax ester,
  a tetrasaccharide, a crown ether, two peptides, an HIV protease inhibitor, vitamin
  E, a propylene-glycol oligomer, an ethyl ester;
- ``second`` (seed 11), 54–126 atoms: two terpenoid chains (squalene, beta-carotene),
  a polyunsaturated fatty acid, a diacylglycerol with an oleoyl chain, a glycolipid
  surfactant, a cyclic hexasaccharide (alpha-cyclodextrin), two peptides of 6 and 7
  residues, and four drugs with flexible side chains (verapamil, tamoxifen,
  sildenafil, lisinopril).

For example::

    python docs/notes/large_heldout.py heldout
    python docs/notes/large_heldout.py heldout2 second
    OMP_NUM_THREADS=1 asebo bench large --dir heldout --optimizers bo sella geometric
"""

import sys
from pathlib import Path

from ase.io import write
from rdkit import Chem

from asebo.smiles import molecule_from_smiles

FIRST = {
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

SECOND = {
    "squalene": r"CC(C)=CCC/C(C)=C/CC/C(C)=C/CC/C=C(\C)CC/C=C(\C)CCC=C(C)C",
    "beta_carotene": r"CC1=C(C(C)(C)CCC1)/C=C/C(C)=C/C=C/C(C)=C/C=C/C=C(C)/C=C/C=C(C)/C=C/"
    r"C2=C(C)CCCC2(C)C",
    "arachidonic_acid": r"CCCCC/C=C\C/C=C\C/C=C\C/C=C\CCCC(=O)O",
    "palmitoyl_oleoyl_glycerol": r"CCCCCCCCCCCCCCCC(=O)OC[C@@H](CO)OC(=O)CCCCCCC/C=C\CCCCCCCC",
    "dodecyl_maltoside": "CCCCCCCCCCCCO[C@@H]1O[C@H](CO)[C@@H](O[C@H]2O[C@H](CO)[C@@H](O)"
    "[C@H](O)[C@H]2O)[C@H](O)[C@H]1O",
    "alpha_cyclodextrin": "OC[C@H]1O[C@@H]2O[C@H]3[C@H](O)[C@@H](O)[C@@H](O[C@H]4[C@H](O)"
    "[C@@H](O)[C@@H](O[C@H]5[C@H](O)[C@@H](O)[C@@H](O[C@H]6[C@H](O)[C@@H](O)[C@@H](O"
    "[C@H]7[C@H](O)[C@@H](O)[C@@H](O[C@H]1[C@H](O)[C@H]2O)O[C@@H]7CO)O[C@@H]6CO)O"
    "[C@@H]5CO)O[C@@H]4CO)O[C@@H]3CO",
    "verapamil": "COc1ccc(CCN(C)CCCC(C#N)(C(C)C)c2ccc(OC)c(OC)c2)cc1OC",
    "tamoxifen": r"CC/C(=C(\c1ccccc1)c1ccc(OCCN(C)C)cc1)c1ccccc1",
    "sildenafil": "CCCc1nn(C)c2c(=O)[nH]c(-c3cc(S(=O)(=O)N4CCN(C)CC4)ccc3OCC)nc12",
    "lisinopril": "NCCCC[C@H](N[C@@H](CCc1ccccc1)C(=O)O)C(=O)N1CCC[C@H]1C(=O)O",
    "peptide_vgvapg": Chem.MolToSmiles(Chem.MolFromSequence("VGVAPG")),
    "peptide_saga_plv": Chem.MolToSmiles(Chem.MolFromSequence("SAGAPLV")),
}

SETS = {"first": (FIRST, 7), "second": (SECOND, 11)}  # molecules, embedding seed

folder = Path(sys.argv[1] if len(sys.argv) > 1 else "heldout")
molecules, seed = SETS[sys.argv[2] if len(sys.argv) > 2 else "first"]
folder.mkdir(parents=True, exist_ok=True)
for name, smiles in molecules.items():
    atoms = molecule_from_smiles(smiles, random_state=seed)
    comment = f"{name} {smiles} (RDKit ETKDGv3 seed {seed}, MMFF94)"
    write(folder / f"{name}.xyz", atoms, comment=comment)
    print(f"{name}: {len(atoms)} atoms")
