"""Write one of the three sets of large molecules outside ``asebo bench large``
(:mod:`asebo.benchmarks._large_heldout`) to a folder, for ``asebo bench large --dir``.

For example::

    python docs/notes/large_heldout.py heldout
    python docs/notes/large_heldout.py heldout2 second
    python docs/notes/large_heldout.py heldout3 third
    OMP_NUM_THREADS=1 asebo bench large --dir heldout --optimizers bo sella geometric
"""

import sys

from ase.io import read

from asebo.benchmarks._large_heldout import write_large_heldout

folder = sys.argv[1] if len(sys.argv) > 1 else "heldout"
which = sys.argv[2] if len(sys.argv) > 2 else "first"
for path in write_large_heldout(folder, [which]):
    print(f"{path.stem}: {len(read(path))} atoms")
