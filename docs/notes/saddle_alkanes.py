"""BOSaddle's own time per call on a methyl rotation of an n-alkane (GFN2-xTB target,
its default GFN1-xTB prior): each step's seconds outside the calculator, and those
after the last step (the checks of the model's order and of the start's mode).

    OMP_NUM_THREADS=1 python docs/notes/saddle_alkanes.py 6 14 18
"""

import sys
import time

from ase import Atoms
from rdkit import Chem
from rdkit.Chem import AllChem
from rdkit.Chem import rdMolTransforms as transforms

from asebo import BOSaddle
from calculators import CountingCalculator, get_calculator


def eclipsed_alkane(carbons):
    """The n-alkane from RDKit and MMFF with its first methyl turned eclipsed: a guess of
    the methyl's rotation."""
    molecule = Chem.AddHs(Chem.MolFromSmiles("C" * carbons))
    AllChem.EmbedMolecule(molecule, randomSeed=3)
    AllChem.MMFFOptimizeMolecule(molecule)
    conformer = molecule.GetConformer()
    first = molecule.GetAtomWithIdx(0)
    hydrogen = next(a.GetIdx() for a in first.GetNeighbors() if a.GetSymbol() == "H")
    transforms.SetDihedralDeg(conformer, hydrogen, 0, 1, 2, 0.0)
    symbols = [atom.GetSymbol() for atom in molecule.GetAtoms()]
    return Atoms(symbols, positions=conformer.GetPositions())


for carbons in map(int, sys.argv[1:] or ["6"]):
    atoms = eclipsed_alkane(carbons)
    atoms.calc = counter = CountingCalculator(get_calculator("gfn2"))
    search = BOSaddle(atoms, logfile=None)
    marks = []
    search.attach(
        lambda marks=marks, calc=counter: marks.append((time.perf_counter(), calc.wall_time))
    )
    start = time.perf_counter()
    converged = search.run(fmax=0.01, steps=15)
    end = time.perf_counter()
    own = end - start - counter.wall_time
    steps, before = [], (start, 0.0)
    for at, inside in marks:
        steps.append(at - before[0] - (inside - before[1]))
        before = (at, inside)
    last = end - marks[-1][0] - (counter.wall_time - marks[-1][1])
    print(
        f"{len(atoms)} atoms: {counter.ncalls} calls, converged {converged}; calculator "
        f"{counter.wall_time:.2f} s; own {own:.1f} s ({own / counter.ncalls:.2f} s a call); "
        f"steps {min(steps):.2f}-{max(steps):.2f} s; after the last step {last:.1f} s"
    )
