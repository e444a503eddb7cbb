"""How well a band's GP predicts the next calls: one GP for every image, or one per image.

A reaction of Birkholz and Schlegel's set shipped with asebo (GFN2-xTB, the benchmark's
band: ``asebo bench neb --set reactions``) runs ``--calls`` calls of BONEB with its
defaults and a restart file; the GP is then fitted, as BONEB fits it, to the first ``k``
configurations computed (``--at``, the endpoints first) and asked for the forces of the
next three. Printed for each ``k``: the largest atomic force computed there and the
largest error of

- ``all``: the GP of all calls, conditioned beyond ``max_size`` rows on those nearest to
  any image's latest call (:class:`asebo.neb.image_models.ImageModels`' ``pooled``);
- ``own``: the GP of the image computed, conditioned on the calls nearest to its own
  latest (what BONEB relaxes that image on);
- ``dense``: with ``--dense``, one GP conditioned on every call (``max_size`` above
  them all: minutes, and gigabytes, for tens of atoms).

    OMP_NUM_THREADS=1 python docs/notes/band_model_errors.py 10_grignard --calls 200 \\
        --at 60 100 140 180

The measurement: docs/notes/molecular-bands.md, "One GP per image beyond the dense
covariance".
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from asebo.benchmarks.neb import REACTIONS, band, gfn2, idpp_band, one_box, reaction
from asebo.neb import BONEB
from asebo.optimize.observations import Observations
from asebo.optimize.surrogate_model import fit_observations


def largest_error(gp, positions, forces):
    """The largest atomic error (eV/Å) of ``gp``'s forces at ``positions`` (n, 3)."""
    _, gradient = gp.predict(positions[None], return_gradient=True)
    return float(np.linalg.norm(forces + np.asarray(gradient)[0], axis=1).max())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reaction", help="a file stem of asebo/data/reactions")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--at", type=int, nargs="+", default=[60, 100, 140, 180])
    parser.add_argument("--dense", action="store_true")
    args = parser.parse_args()
    initial, final, moving = reaction(REACTIONS / f"{args.reaction}.xyz")
    positions = idpp_band(initial, final, moving)
    neb = band(initial, final, positions, one_box(gfn2, positions))
    restart = Path(tempfile.mkdtemp()) / "band.json"
    converged = BONEB(neb, logfile=None, restart=restart).run(fmax=0.05, steps=args.calls)
    numbers = initial.get_atomic_numbers()
    arrays = Observations.load(numbers, restart).arrays()
    image_of = json.loads(restart.read_text())["images"]
    print(
        f"{args.reaction}: {len(image_of)} computed, the endpoints included; converged: {converged}"
    )
    last = len(neb.images) - 1
    for k in (k for k in args.at if k + 3 <= len(image_of)):
        latest = {image: at for at, image in enumerate(image_of[:k]) if image not in (0, last)}
        fitted = BONEB(neb, logfile=None)  # its prior and representation
        pooled = fitted.models.pooled
        taken = tuple(part[:k] for part in arrays)
        near = sorted(latest.values())
        fit_observations(pooled, fitted.prior, fitted.representation, numbers, taken, None, near)
        dense = None
        if args.dense:
            dense = BONEB(neb, logfile=None, gp_options={"max_size": 10**9})
            fit_observations(
                dense.models.pooled, dense.prior, dense.representation, numbers, taken, None
            )
        rows = []
        for at in range(k, k + 3):
            image, where, forces = image_of[at], arrays[0][at], arrays[2][at]
            own = pooled.conditioned_near([latest[image]]) if image in latest else pooled
            row = {
                "image": image,
                "force": float(np.linalg.norm(forces, axis=1).max()),
                "all": largest_error(pooled, where, forces),
                "own": largest_error(own, where, forces),
            }
            if dense is not None:
                row["dense"] = largest_error(dense.models.pooled, where, forces)
            rows.append(row)
        print(f"k = {k}: the next calls' largest force and errors (eV/Å)")
        for row in rows:
            errors = ", ".join(f"{key} {value:.2f}" for key, value in row.items() if key != "image")
            print(f"  image {row['image']}: {errors}")


if __name__ == "__main__":
    main()
