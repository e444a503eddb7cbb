"""Large molecules outside ``asebo bench large``, for the check that its figures and each
special-case rule hold where no choice was made: three sets of 12, of other kinds than
the shipped set's, built from SMILES as the shipped set is but with other embedding
seeds (RDKit ETKDGv3, MMFF94).

- ``first`` (seed 7), 50–118 atoms: a macrolide, a taxane, a bile acid, a wax ester,
  a tetrasaccharide, a crown ether, two peptides, an HIV protease inhibitor, vitamin
  E, a propylene-glycol oligomer, an ethyl ester;
- ``second`` (seed 11), 54–126 atoms: two terpenoid chains, a polyunsaturated fatty
  acid, a diacylglycerol, a glycolipid surfactant, a cyclic hexasaccharide, two
  peptides of 6 and 7 residues, and four drugs with flexible side chains;
- ``third`` (seed 13), 62–125 atoms: a trisaccharide, a sterol ester, a sphingolipid,
  a glycol diether, a biotin with a PEG linker, vitamin D3, two peptides of 4 and 6
  residues, and four drugs.
"""

from pathlib import Path

from rdkit import Chem

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

THIRD = {
    "raffinose": "OC[C@H]1O[C@H](OC[C@H]2O[C@H](O[C@]3(CO)O[C@H](CO)[C@@H](O)[C@@H]3O)"
    "[C@H](O)[C@@H](O)[C@@H]2O)[C@H](O)[C@@H](O)[C@H]1O",
    "cholesteryl_oleate": r"CCCCCCCC/C=C\CCCCCCCC(=O)O[C@H]1CC[C@@]2(C)C(=CC[C@H]3[C@@H]4CC"
    "[C@H]([C@H](C)CCCC(C)C)[C@@]4(C)CC[C@@H]32)C1",
    "simvastatin": "CCC(C)(C)C(=O)O[C@H]1C[C@@H](C)C=C2C=C[C@H](C)[C@H](CC[C@@H]3C[C@@H](O)"
    "CC(=O)O3)[C@@H]12",
    "montelukast": r"CC(C)(O)c1ccccc1CC[C@@H](SCC1(CC(=O)O)CC1)c1cccc(/C=C/c2ccc3ccc(Cl)cc3n2)c1",
    "fexofenadine": "CC(C)(C(=O)O)c1ccc(C(O)CCCN2CCC(C(O)(c3ccccc3)c3ccccc3)CC2)cc1",
    "bosentan": "COc1ccccc1Oc1c(NS(=O)(=O)c2ccc(C(C)(C)C)cc2)nc(-c2ncccn2)nc1OCCO",
    "ceramide_c16": r"CCCCCCCCCCCCC/C=C/[C@@H](O)[C@H](CO)NC(=O)CCCCCCCCCCCCCCC",
    "triethylene_glycol_dioctyl_ether": "CCCCCCCCOCCOCCOCCOCCCCCCCC",
    "biotin_peg3_amine": "NCCOCCOCCOCCNC(=O)CCCC[C@@H]1SC[C@@H]2NC(=O)N[C@H]12",
    "peptide_klvffa": Chem.MolToSmiles(Chem.MolFromSequence("KLVFFA")),
    "peptide_drvy": Chem.MolToSmiles(Chem.MolFromSequence("DRVY")),
    "cholecalciferol": r"C=C1CC[C@H](O)C/C1=C/C=C1\CCC[C@@]2(C)[C@H]1CC[C@@H]2[C@H](C)CCCC(C)C",
}

SETS = {"first": (FIRST, 7), "second": (SECOND, 11), "third": (THIRD, 13)}
"""Each set's molecules (name: SMILES) and its embedding seed."""


def write_large_heldout(folder, which=("first", "second", "third")):
    """Write the starts of the sets ``which`` to ``folder`` as xyz files, the SMILES and
    seed in each comment line; a file already there is kept.

    Returns
    -------
    list of pathlib.Path
        The files, sorted.
    """
    from ase.io import write

    from asebo.smiles import molecule_from_smiles

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for name in which:
        molecules, seed = SETS[name]
        for stem, smiles in molecules.items():
            path = folder / f"{stem}.xyz"
            if not path.exists():
                atoms = molecule_from_smiles(smiles, random_state=seed)
                comment = f"{stem} {smiles} (RDKit ETKDGv3 seed {seed}, MMFF94)"
                write(path, atoms, comment=comment)
            files.append(path)
    return sorted(files)
