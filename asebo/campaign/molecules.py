"""Molecules of a comparison campaign from ASE names, structure files or SMILES.

:func:`load_molecule` turns what a user types after ``--molecules`` into a label and
an :class:`ase.Atoms`: a path to any file ASE reads, a name of ASE's molecule
collection (the G2 set of ``ase.build.molecule``, by formula such as ``H2O`` or by
common name such as ``water``), or a SMILES string that RDKit builds in 3D.
"""

import os
import re
from difflib import get_close_matches
from functools import cache
from pathlib import Path

from ase import Atoms
from ase.build import molecule as ase_molecule
from ase.build.molecule import extra
from ase.collections import g2
from ase.data import g2_1, g2_2
from ase.io import read
from ase.io.formats import ioformats

from asebo.smiles import molecule_from_smiles

SMILES_PREFIX = "smiles:"


@cache
def common_names():
    """Lower-case common names of ASE's G2 molecules, mapped to their formula names.

    The name is the description's words before its parenthesis (``'Water (H2O), C2v
    symm.'`` gives ``'water'``); names shared by two molecules are left out.

    Returns
    -------
    dict of str to str
        ``{'water': 'H2O', 'ethanol': 'CH3CH2OH', ...}``.
    """
    descriptions = {**g2_1.data, **g2_2.data}
    found = {}
    for name in g2.names:
        description = descriptions.get(name, {}).get("description", "")
        match = re.match(r"([A-Za-z][A-Za-z \-]*?),? \(", description)
        if match is None:
            continue
        common = match.group(1).strip().lower()
        if common and common != name.lower():
            found.setdefault(common, []).append(name)
    return {common: names[0] for common, names in found.items() if len(names) == 1}


def ase_names():
    """Every molecule name :func:`ase.build.molecule` knows (G2 and its extras)."""
    return [*g2.names, *extra]


def _read_file(path):
    try:
        atoms = read(path)
    except Exception as error:  # ASE raises many kinds for unreadable files
        raise ValueError(
            f"cannot read molecule file {path}: {type(error).__name__}: "
            f"{error}. Give a file in a format ASE reads (xyz, extxyz, pdb, "
            "sdf, cif, traj, ...) or pass format-specific files through "
            "ase.io.read yourself"
        ) from error
    if not isinstance(atoms, Atoms) or len(atoms) == 0:
        raise ValueError(f"molecule file {path} holds no atoms")
    return atoms


def _looks_like_path(spec):
    suffix = Path(spec).suffix.lstrip(".").lower()
    return os.sep in spec or "/" in spec or (suffix and suffix in ioformats)


def load_molecule(spec):
    """The label and the atoms of a molecule given by a file, a name or a SMILES.

    Parameters
    ----------
    spec : str
        Tried in this order: an existing file (read by :func:`ase.io.read`, its last
        image; the label is the file name without its suffix); ``'smiles:...'``
        (always a SMILES); a name of :func:`ase.build.molecule` (``'H2O'``,
        ``'CH3CH2OH'``) or a common name of a G2 molecule (``'water'``,
        ``'ethanol'``); anything else as a SMILES. Names win over SMILES: ``'CO'``
        is carbon monoxide, ``'smiles:CO'`` methanol.

    Returns
    -------
    label : str
        The name stored with every run of the molecule.
    atoms : ase.Atoms
        The reference geometry, without calculator.

    Raises
    ------
    ValueError
        For a missing or unreadable file, an invalid SMILES or an unknown name.
    """
    spec = str(spec).strip()
    if not spec:
        raise ValueError("empty molecule name: give a name (H2O), a file or a SMILES")
    if os.path.isfile(spec):
        return Path(spec).stem, _read_file(spec)
    if spec.lower().startswith(SMILES_PREFIX):
        smiles = spec[len(SMILES_PREFIX) :].strip()
        return smiles, molecule_from_smiles(smiles)
    if spec in ase_names():
        return spec, ase_molecule(spec)
    if spec.lower() in common_names():
        return spec, ase_molecule(common_names()[spec.lower()])
    if _looks_like_path(spec):
        raise ValueError(f"no molecule file {spec}: check the path")
    try:
        return spec, molecule_from_smiles(spec)
    except ValueError as error:
        close = get_close_matches(spec, ase_names() + list(common_names()), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown molecule {spec!r}: not a file, not a name of ase.build.molecule "
            f"(e.g. H2O, CH3CH2OH, water, ethanol) and not a SMILES that RDKit can "
            f"build ({error}).{hint}"
        ) from error
