"""Make the configuration sets shipped in ``asebo/data`` for the prediction benchmark.

Each set is a molecule relaxed with the calculator (after a GFN2-xTB pre-relaxation
for GPAW: the default of ``generate_dataset``, which ``load_dataset`` and
``asebo bench prediction`` use as well), displaced by seeded Gaussian noise and
labelled with energies and forces (Wong and Kolter, "Application to Molecular Energy
Prediction"). A run that is stopped resumes where it left off. Without arguments it
makes the shipped sets:

    OMP_NUM_THREADS=1 python examples/make_prediction_data.py

One set, e.g. the full GPAW glycerol set of the paper (100 configurations, about
1-2 min each on one core):

    OMP_NUM_THREADS=1 python examples/make_prediction_data.py --molecule glycerol \
        --calc gpaw --configs 100
"""

import argparse
import time
from pathlib import Path

from asebo.learn.prediction import DATA_DIR, dataset_filename, generate_dataset

SHIPPED = [
    ("water", "gpaw", 100),
    ("glycerol", "gpaw:mode=lcao", 100),
    ("glycerol", "gfn2", 100),
    ("water", "gfn2", 100),
]


def make(molecule, calculator, count, out, seed):
    path = Path(out) / dataset_filename(molecule, calculator, random_state=seed)
    start = time.perf_counter()
    data = generate_dataset(
        molecule, calculator, count, random_state=seed, path=path, progress=True
    )
    print(
        f"{path}: {len(data)} configurations of {len(data.numbers)} atoms, "
        f"energy std {data.energies.std():.3f} eV, {time.perf_counter() - start:.0f} s"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecule", help="name (water, glycerol, nonanol) or SMILES")
    parser.add_argument(
        "--calc", default="gpaw", help="calculator preset: gfn2, gpaw, gpaw:mode=lcao, emt ..."
    )
    parser.add_argument("--configs", type=int, default=100)
    parser.add_argument("--out", default=str(DATA_DIR))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sets = [(args.molecule, args.calc, args.configs)] if args.molecule else SHIPPED
    for molecule, calculator, count in sets:
        make(molecule, calculator, count, args.out, args.seed)


if __name__ == "__main__":
    main()
