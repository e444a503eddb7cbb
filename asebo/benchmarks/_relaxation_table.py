"""Force calls to relax a folder of molecules, several optimizers side by side.

The machinery of ``asebo bench baker`` and ``asebo bench druglike``: every molecule
is relaxed with each optimizer to ``--fmax``, and one table gives the force calls per
molecule, the totals, the ratios of each total to GPMin's and BFGS's, failures, and
energies that end more than 0.01 eV above the best one found
(:func:`asebo.benchmarks._materials.table`, as for the periodic sets); with
``--audit``, whether each endpoint is a minimum
(:mod:`asebo.benchmarks._endpoint_audit`). Each run also records how far its endpoint
lies from the start (:func:`distance_from_start`): where optimizers end in different
minima, it says which travelled further from the start.
"""

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from ase.build import minimize_rotation_and_translation
from ase.io import read

from asebo.benchmarks._materials import add_kappa, bo_options, check_optimizers, table
from asebo.benchmarks._options import positive_float, positive_int, refuse_unknown

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def add_arguments(parser, folder, optimizers=None):
    """The options of a relaxation benchmark on the xyz files of ``folder``
    (``--optimizers`` only with a default list of ``optimizers``)."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=folder,
        help="folder of the xyz files (default: the set shipped with asebo)",
    )
    parser.add_argument(
        "--molecules",
        nargs="+",
        default=None,
        help="file stems or substrings to run (default: all)",
    )
    if optimizers is not None:
        parser.add_argument(
            "--optimizers",
            nargs="+",
            default=optimizers,
            help="bo, bfgs, lbfgs, fire, gpmin, sella (pip install "
            "'asebo[sella]'), geometric (pip install 'asebo[geometric]'); "
            "'bo+gfn1' runs bo with a GFN1-xTB prior (any calculator preset after "
            "the '+'), 'bo+max' with a constant prior instead of the Lindh model",
        )
        add_symmetry_probe(parser)
        add_kappa(parser)
    parser.add_argument("--calc", default="gfn2")
    parser.add_argument("--fmax", type=positive_float, default=0.05)
    parser.add_argument("--steps", type=positive_int, default=300)
    parser.add_argument("--jobs", type=positive_int, default=2)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument(
        "--audit",
        action="store_true",
        help="also compute the target's finite-difference Hessian at every endpoint "
        "(6n calls each, not counted) and count the saddle points per optimizer",
    )


def add_symmetry_probe(parser):
    """The ``--symmetry-probe`` option: bo's ``SpecialCases.symmetry_probe``."""
    parser.add_argument(
        "--symmetry-probe",
        type=float,
        default=None,
        metavar="ANGSTROM",
        help="bo's SpecialCases.symmetry_probe: at a symmetric endpoint that every "
        "configuration kept, one call this far off the symmetry (default: off)",
    )


def molecule_files(folder, wanted):
    """The xyz files of ``folder`` whose stems contain one of ``wanted`` (all: None)."""
    if not folder.is_dir():
        raise SystemExit(f"no folder {folder}: pass --dir with a folder of xyz files")
    files = sorted(folder.glob("*.xyz"))
    if wanted:
        files = [f for f in files if any(w in f.stem for w in wanted)]
    if not files:
        raise SystemExit(f"no xyz file in {folder} matches {' '.join(wanted or ['*'])}")
    return files


def distance_from_start(start, positions):
    """The root-mean-square distance (Å) of ``positions`` (n, 3) from those of the
    molecule ``start``, after the rotation and translation of ``positions`` that minimise
    it (W. Kabsch, Acta Cryst. A 32, 922 (1976), through
    :func:`ase.build.minimize_rotation_and_translation`)."""
    endpoint = start.copy()
    endpoint.positions = positions
    minimize_rotation_and_translation(start, endpoint)
    return float(np.sqrt(np.mean(np.sum((endpoint.positions - start.positions) ** 2, axis=1))))


def _run_one(task):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from asebo.campaign.relax import relax

    torch.set_num_threads(1)
    path, label, calc, fmax, steps, audit, probe, kappa = task
    optimizer, _, prior = label.partition("+")
    atoms = read(path)
    options = bo_options(probe, kappa) if optimizer == "bo" else None
    try:
        result = relax(atoms, optimizer, calc, fmax, steps, prior=prior or None, options=options)
    except Exception as error:  # a failed run is reported, the others go on
        return path.stem, label, {"error": f"{type(error).__name__}: {error}"}
    positions = result.pop("positions")
    result["rmsd_from_start"] = distance_from_start(atoms, positions)
    if audit:
        from asebo.benchmarks._endpoint_audit import imaginary_modes
        from calculators import get_calculator

        endpoint = atoms.copy()
        endpoint.positions = positions
        result["imaginary"] = imaginary_modes(endpoint, get_calculator(calc))
    return path.stem, label, result


def run(args):
    """Relax every molecule with every optimizer and print the table."""
    from calculators import get_calculator

    check_optimizers(args.optimizers)
    command = f"asebo bench {getattr(args, 'benchmark', '')}".rstrip()
    refuse_unknown(command, [("--calc", get_calculator, args.calc)])
    files = molecule_files(args.dir, args.molecules)
    audit = getattr(args, "audit", False)
    probe = getattr(args, "symmetry_probe", None)
    kappa = getattr(args, "kappa", None)
    tasks = [
        (f, o, args.calc, args.fmax, args.steps, audit, probe, kappa)
        for f in files
        for o in args.optimizers
    ]
    results = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for stem, label, result in pool.map(_run_one, tasks):
            results.setdefault(stem, {})[label] = result
    labels = list(next(iter(results.values())))
    text = table(results, labels, first_column="molecule")
    if audit:
        from asebo.benchmarks._endpoint_audit import audit_section

        text = "\n".join([text, *audit_section(results, labels)])
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
