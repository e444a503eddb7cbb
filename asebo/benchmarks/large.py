"""Force calls to relax 14 large, flexible molecules (57 to 111 atoms) from force-field starts.

The molecules a DFT user brings beyond the drug-like sets: a fatty-acid ester, a
diacylglycerol, a triglyceride, a lipid with two C16 chains, an oligo-ether (PEG-8),
peptides of 5 and 8 residues, a cyclic hexapeptide, a trisaccharide, an acetylated
sugar, a ligand with a long ether linker, cholesterol, atorvastatin and imatinib:
a dozen soft torsions each. Built as the drug-like sets are (RDKit ETKDGv3 with
seed 3 and MMFF94; the SMILES is on each file's comment line) and shipped in
``asebo/data/large``; the table is that of ``asebo bench baker``.
"""

from asebo.benchmarks import _relaxation_table
from asebo.benchmarks.druglike import run

__all__ = ["DEFAULT_DIR", "OPTIMIZERS", "add_arguments", "run"]

DEFAULT_DIR = _relaxation_table.DATA_DIR / "large"
OPTIMIZERS = ["bo", "bfgs", "sella", "geometric"]


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)
