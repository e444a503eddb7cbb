"""Relax a molecule from a structure file with BOOptimizer.

Logs, for every step, the time, the energy, the largest force and the energy the
GP predicted for that configuration. Writes the relaxed structure to ``--output``
(default: FILE's stem with ``_relaxed.xyz``; an existing file is kept unless
``--force``) and returns 0 when converged, 1 when not. Problems with the input (a
file ASE cannot read, no atoms, an unusable restart file, an element the calculator
does not know, an ``--fmax``, ``--steps`` or ``--threads`` that cannot be, an output,
log, trajectory or restart file in a folder that does not exist, ``--observations``
frames that are not of this molecule or hold no forces) stop it with a one-line
message, the last three before any calculator call. ``--threads`` sets the threads
of the optimizer's own work (:mod:`asebo.threads`). ``--hessian FILE`` also writes
the model's vibrations at the end (:meth:`asebo.BOOptimizer.vibrations`) to a
``.json`` file, or its Hessian (:meth:`asebo.BOOptimizer.hessian`) to a ``.npy`` file;
another suffix is refused before any call.
"""

import math
from pathlib import Path

import numpy as np
from ase import units

from asebo.model.prior_names import AUTO, MODEL_PRIORS
from calculators import available, get_calculator

HESSIAN_SUFFIXES = (".json", ".npy")
"""The files ``--hessian`` writes: ASE's vibrations, or the Hessian as an array."""


def add_arguments(parser):
    parser.add_argument("file", type=Path, help="any structure file ASE reads")
    parser.add_argument(
        "--calc",
        default="gfn2",
        choices=available(),
        help="calculator preset (default: gfn2, GFN2-xTB)",
    )
    parser.add_argument(
        "--prior",
        default=None,
        choices=[*MODEL_PRIORS, AUTO, *available()],
        help="the GP's prior mean: lindh (default: harmonic model with "
        "Lindh's force constants), max, mean, a calculator preset "
        "(Δ-learning), or auto (GFN2-xTB when the target is another "
        "calculator and GFN2-xTB describes the system, lindh otherwise)",
    )
    parser.add_argument("--fmax", type=float, default=0.05, help="eV/Å")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument(
        "--kappa",
        type=float,
        default=None,
        help="weight of the uncertainty in mu - kappa sigma; < 0 penalises uncertain steps "
        "(default 0.1 below 90 free coordinates, -3 from 90)",
    )
    parser.add_argument("--maxstep", type=float, default=None, help="Å")
    parser.add_argument("--trajectory", type=Path, default=None)
    parser.add_argument(
        "--restart",
        type=Path,
        default=None,
        help="restart file: read if present, written every step",
    )
    parser.add_argument(
        "--observations",
        type=Path,
        default=None,
        help="a warm start: a trajectory (or ase.db, extended XYZ) of earlier calculations "
        "of this molecule with the same calculator, taken as observations",
    )
    parser.add_argument(
        "--hessian",
        type=Path,
        default=None,
        help="also write the model's Hessian at the end, at no call: FILE.json as ASE "
        "vibrations (ase.vibrations.VibrationsData.read: frequencies, zero-point energy), "
        "FILE.npy as the (3N, 3N) array in eV/Å² (numpy.load)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of the optimizer's own linear algebra, between the calculator's calls "
        "(default: OMP_NUM_THREADS where set, else 1; the calculator keeps its own)",
    )
    parser.add_argument("--logfile", default="-")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")


def _one_line(error):
    return " ".join(str(error).split())


def _check_options(args, output):
    """Refuse a threshold, step count or file the run could not use, before any call."""
    if not (math.isfinite(args.fmax) and args.fmax > 0):
        raise SystemExit(f"--fmax must be a positive force in eV/Å, got {args.fmax}")
    if args.steps < 0:
        raise SystemExit(f"--steps must be 0 or more, got {args.steps}")
    if args.threads is not None and args.threads < 1:
        raise SystemExit(f"--threads must be 1 or more, got {args.threads}")
    if args.hessian is not None and args.hessian.suffix not in HESSIAN_SUFFIXES:
        raise SystemExit(
            f"--hessian {args.hessian}: name it .json (ASE's VibrationsData) or .npy (the "
            "(3N, 3N) Hessian in eV/Å²)"
        )
    for option, path in (("--output", output), ("--hessian", args.hessian)):
        if path is not None and path.exists() and not args.force:
            raise SystemExit(
                f"{path} exists: pass --force to overwrite it, or {option} another name"
            )
    files = {
        "--output": output,
        "--trajectory": args.trajectory,
        "--restart": args.restart,
        "--hessian": args.hessian,
    }
    if args.logfile != "-":
        files["--logfile"] = Path(args.logfile)
    for option, path in files.items():
        if path is not None and not path.absolute().parent.is_dir():
            raise SystemExit(
                f"{option} {path}: the folder {path.absolute().parent} does not exist; create it "
                "first"
            )


def run(args):
    # the optimizer brings PyTorch and BoTorch, ase.io a second: imported here, not for --help
    import ase.io

    from asebo.model.priors import resolve_prior
    from asebo.optimize.optimizer import BOOptimizer, RestartError

    output = args.output or args.file.with_name(f"{args.file.stem}_relaxed.xyz")
    _check_options(args, output)
    try:
        atoms = ase.io.read(args.file)
    except Exception as error:  # any reader's error, in one line
        raise SystemExit(f"cannot read {args.file}: {_one_line(error)}") from error
    if isinstance(atoms, list):
        raise SystemExit(f"{args.file} holds no structure: give a file with one molecule")
    atoms.calc = get_calculator(args.calc)
    prior = resolve_prior(args.prior)
    try:
        opt = BOOptimizer(
            atoms,
            restart=None if args.restart is None else str(args.restart),
            logfile=args.logfile,
            prior=prior,
            kappa=args.kappa,
            maxstep=args.maxstep,
            trajectory=None if args.trajectory is None else str(args.trajectory),
            observations=args.observations,
            threads=args.threads,
        )
    except (ValueError, TypeError, PermissionError, RestartError, FileNotFoundError) as error:
        raise SystemExit(f"{args.file}: {_one_line(error)}") from error
    try:
        converged = opt.run(fmax=args.fmax, steps=args.steps)
    except Exception as error:  # the calculator's own errors, in one line
        kept = (
            f"; the {len(opt.energies)} observations so far are kept in {args.restart}"
            if args.restart and len(opt.energies)
            else ""
        )
        raise SystemExit(
            f"the {args.calc} calculator failed on {args.file}: "
            f"{type(error).__name__}: {_one_line(error)}{kept}"
        ) from error
    ase.io.write(output, atoms)
    energy = opt.optimizable.get_value()
    fmax = opt.optimizable.gradient_norm(opt.optimizable.get_gradient())
    print(
        f"{'converged' if converged else 'not converged'} after {opt.nsteps} steps; "
        f"energy {energy:.6f} eV, fmax {fmax:.4f} eV/Å; written to {output}"
    )
    if args.hessian is not None:
        _write_vibrations(opt, args.hessian)
    return 0 if converged else 1


def _write_vibrations(opt, path):
    """Write the model's vibrations at the lowest configuration to ``path`` and say so."""
    curvature = opt.model_curvature()
    vibrations = opt.vibrations(curvature)
    path.unlink(missing_ok=True)  # ASE's writer refuses an existing file
    if path.suffix == ".npy":
        np.save(path, opt.hessian(curvature))  # (3N, 3N), eV/Å², atom-major
    else:
        vibrations.write(str(path))
    wavenumbers = vibrations.get_energies() / units.invcm
    # the rigid motions, projected out, sit at zero
    real = wavenumbers.real[(wavenumbers.imag == 0) & (wavenumbers.real > 1.0)]
    lowest = f"{real.min():.0f} cm⁻¹" if len(real) else "none"
    print(
        f"model {'Hessian' if path.suffix == '.npy' else 'vibrations'} written to {path}: "
        f"lowest real frequency {lowest}, zero-point "
        f"energy {vibrations.get_zero_point_energy():.4f} eV; the Hessian given as a "
        f"result, with the GP's constant at this configuration (the line at "
        f"convergence reads the GP that steps): {curvature.summary()}"
    )
