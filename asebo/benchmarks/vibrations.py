"""The model's vibrations at the end of a relaxation against the target's own.

Relaxes each molecule of a folder (the Baker set by default) with BOOptimizer to
``--fmax``, takes :meth:`asebo.BOOptimizer.hessian` (the GP's Hessian, no call) and
compares it with the harmonic frequencies of the target's finite-difference Hessian at
the same configuration (6n calls, not counted), both with the rigid motions projected
out and sorted: the median relative error of the modes above ``--above`` cm⁻¹, the
zero-point energy's relative error, and the mean absolute error of the five lowest
modes. ``--prior gfn1`` gives BOOptimizer a GFN1-xTB prior.
"""

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from ase import units

from asebo.benchmarks._options import positive_float, positive_int
from asebo.benchmarks._relaxation_table import DATA_DIR, molecule_files

HIGH = 500.0  # cm⁻¹: the modes whose relative error is reported
LOWEST = 5  # the lowest modes whose absolute error is reported


def add_arguments(parser):
    parser.add_argument(
        "--dir",
        type=Path,
        default=DATA_DIR / "baker",
        help="folder of the xyz files (default: the Baker set shipped with asebo)",
    )
    parser.add_argument(
        "--molecules", nargs="+", default=None, help="file stems or substrings to run"
    )
    parser.add_argument("--calc", default="gfn2", help="the target (default: gfn2)")
    parser.add_argument("--prior", default=None, help="prior of bo (default: its own)")
    parser.add_argument("--fmax", type=positive_float, default=0.05)
    parser.add_argument("--steps", type=positive_int, default=300)
    parser.add_argument("--above", type=float, default=HIGH, help="cm⁻¹ (default: 500)")
    parser.add_argument("--jobs", type=positive_int, default=2)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")


def compare_one(task):
    """Relax one molecule, then compare the model's frequencies with the target's.

    Returns
    -------
    name : str
    result : dict
        ``calls``, ``converged``, ``model`` and ``target`` (frequencies, cm⁻¹, sorted,
        imaginary negative, rigid motions projected out), or ``error``.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    from ase.io import read

    from asebo import BOOptimizer
    from asebo.benchmarks._endpoint_audit import finite_difference_hessian, frequencies
    from asebo.model.priors import resolve_prior
    from calculators import get_calculator

    torch.set_num_threads(1)
    path, calc, prior, fmax, steps = task
    atoms = read(path)
    atoms.calc = get_calculator(calc)
    try:
        optimizer = BOOptimizer(atoms, logfile=None, prior=resolve_prior(prior))
        converged = optimizer.run(fmax=fmax, steps=steps)
        hessian = optimizer.hessian()
    except Exception as error:  # noqa: BLE001  reported in the table; the set goes on
        return path.stem, {"error": f"{type(error).__name__}: {error}"}
    endpoint = atoms.copy()
    endpoint.positions = optimizer.observations.positions[optimizer.observations.best()]
    model = frequencies(hessian, endpoint)
    target = frequencies(finite_difference_hessian(endpoint, get_calculator(calc)), endpoint)
    return path.stem, {
        "calls": len(optimizer.observations),
        "converged": bool(converged),
        "model": model.tolist(),
        "target": target.tolist(),
    }


def zero_point_energy(wavenumbers):
    """Zero-point energy, eV, of the real frequencies (k,) in cm⁻¹."""
    wavenumbers = np.asarray(wavenumbers)
    return 0.5 * wavenumbers[wavenumbers > 0].sum() * units.invcm


def errors(model, target, above=HIGH):
    """The three errors of one molecule's model frequencies against the target's.

    Parameters
    ----------
    model, target : arrays (k,)
        Sorted frequencies, cm⁻¹.
    above : float
        cm⁻¹: the modes of the target above it enter the relative error.

    Returns
    -------
    high : float
        Median of ``|model - target| / target`` over the modes above ``above`` (NaN when
        there is none).
    zpe : float
        Relative error of the zero-point energy.
    lowest : float
        Mean ``|model - target|`` of the :data:`LOWEST` lowest modes, cm⁻¹.
    """
    model, target = np.asarray(model), np.asarray(target)
    high = target > above
    relative = np.abs(model[high] - target[high]) / target[high]
    median = float(np.median(relative)) if high.any() else float("nan")
    zpe = zero_point_energy(model) / zero_point_energy(target) - 1.0
    lowest = float(np.mean(np.abs(model[:LOWEST] - target[:LOWEST])))
    return median, float(zpe), lowest


def table(results, above=HIGH):
    """Markdown rows per molecule and the medians over the set."""
    lines = [
        f"| molecule | calls | median error > {above:g} cm⁻¹ | ZPE error | "
        f"lowest {LOWEST}, cm⁻¹ | lowest model / target, cm⁻¹ |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    collected = []
    for name, result in results.items():
        if "error" in result:
            lines.append(f"| {name} | error | | | | |")
            continue
        high, zpe, lowest = errors(result["model"], result["target"], above)
        collected.append((high, zpe, lowest))
        mark = "" if result["converged"] else "*"
        lines.append(
            f"| {name} | {result['calls']}{mark} | {100 * high:.1f} % | {100 * zpe:+.2f} % | "
            f"{lowest:.0f} | {result['model'][0]:.0f} / {result['target'][0]:.0f} |"
        )
    if collected:
        high, zpe, lowest = np.array(collected).T
        lines += [
            "",
            f"- molecules: {len(collected)}; median of the median errors above {above:g} "
            f"cm⁻¹: {100 * np.nanmedian(high):.1f} %; ZPE error: median "
            f"{100 * np.median(np.abs(zpe)):.2f} %, largest {100 * np.max(np.abs(zpe)):.2f} "
            f"%, within 2 % on {int(np.sum(np.abs(zpe) <= 0.02))}; lowest {LOWEST} modes: "
            f"median {np.median(lowest):.0f} cm⁻¹",
        ]
    lines += [
        f"- {name}: {result['error']}" for name, result in results.items() if "error" in result
    ]
    return "\n".join(lines)


def run(args):
    files = molecule_files(args.dir, args.molecules)
    tasks = [(path, args.calc, args.prior, args.fmax, args.steps) for path in files]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(pool.map(compare_one, tasks))
    text = table(results, args.above)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
