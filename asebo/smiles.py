"""A 3D molecule from a SMILES string (RDKit: ETKDG embedding, MMFF94 relaxation)."""

import numpy as np
from ase import Atoms


def molecule_from_smiles(smiles, random_state=0):
    """A 3D structure of a SMILES string, built by RDKit.

    Hydrogens are added, one conformer is embedded by ETKDG (version 3) with the
    fixed ``random_state`` and optimized with the MMFF94 force field (UFF where MMFF
    has no parameters). Formal charges become the atoms' initial charges, from which
    calculators such as tblite take the total charge.

    Parameters
    ----------
    smiles : str
        The SMILES string, e.g. ``'CCO'`` for ethanol.
    random_state : int
        Seed of the embedding: the same seed gives the same coordinates.

    Returns
    -------
    ase.Atoms

    Raises
    ------
    ValueError
        When RDKit cannot parse the string or cannot embed the molecule in 3D.

    References
    ----------
    S. Riniker, G. A. Landrum, J. Chem. Inf. Model. 55, 2562 (2015) (ETKDG).
    T. A. Halgren, J. Comput. Chem. 17, 490 (1996) (MMFF94).
    """
    try:
        from rdkit import Chem, rdBase
        from rdkit.Chem import AllChem
    except ImportError as error:
        raise ImportError(
            "building a molecule from SMILES needs RDKit: pip install rdkit "
            "(in the extras 'asebo[learn]' and 'asebo[campaign]')"
        ) from error

    with rdBase.BlockLogs():
        parsed = Chem.MolFromSmiles(smiles)
    if parsed is None:
        raise ValueError(
            f"invalid SMILES {smiles!r}: RDKit cannot parse it. Check the "
            "ring closures, brackets and element symbols (e.g. 'CCO' is ethanol)"
        )
    mol = Chem.AddHs(parsed)
    params = AllChem.ETKDGv3()
    params.randomSeed = int(random_state)
    if AllChem.EmbedMolecule(mol, params) != 0:
        raise ValueError(
            f"RDKit could not build a 3D structure for SMILES {smiles!r}: "
            "give the molecule as a structure file (xyz, sdf, ...) instead"
        )
    if AllChem.MMFFHasAllMoleculeParams(mol):
        AllChem.MMFFOptimizeMolecule(mol, maxIters=2000)
    elif AllChem.UFFHasAllMoleculeParams(mol):
        AllChem.UFFOptimizeMolecule(mol, maxIters=2000)
    positions = np.array(mol.GetConformer().GetPositions(), dtype=np.float64)  # (n, 3)
    atoms = Atoms(numbers=[atom.GetAtomicNum() for atom in mol.GetAtoms()], positions=positions)
    atoms.set_initial_charges([float(atom.GetFormalCharge()) for atom in mol.GetAtoms()])
    return atoms
