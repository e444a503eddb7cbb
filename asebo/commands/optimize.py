"""Relax a molecule from a structure file with BOOptimizer.

Logs, for every step, the time, the energy, the largest force and the energy the
GP predicted for that configuration. Writes the relaxed structure to ``--output``
(default: FILE's stem with ``_relaxed.xyz``) and returns 0 when converged, 1 when
not.
"""

from pathlib import Path

from ase.io import read, write

from asebo.optimize import MODEL_PRIORS, BOOptimizer
from calculators import available, get_calculator


def add_arguments(parser):
    parser.add_argument("file", type=Path, help="any structure file ASE reads")
    parser.add_argument("--calc", default="gfn2", choices=available(),
                        help="calculator preset (default: gfn2, GFN2-xTB)")
    parser.add_argument("--prior", default=None, choices=[*MODEL_PRIORS, *available()],
                        help="the GP's prior mean: lindh (default: harmonic model with "
                             "Lindh's force constants), max, mean, or a calculator preset "
                             "(Δ-learning)")
    parser.add_argument("--fmax", type=float, default=0.05, help="eV/Å")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--kappa", type=float, default=None,
                        help="exploration weight of the lower confidence bound")
    parser.add_argument("--maxstep", type=float, default=None, help="Å")
    parser.add_argument("--trajectory", type=Path, default=None)
    parser.add_argument("--restart", type=Path, default=None,
                        help="restart file: read if present, written every step")
    parser.add_argument("--logfile", default="-")
    parser.add_argument("--output", type=Path, default=None)


def run(args):
    try:
        atoms = read(args.file)
    except Exception as error:
        raise SystemExit(f"cannot read {args.file}: {error}") from error
    atoms.calc = get_calculator(args.calc)
    prior = (get_calculator(args.prior) if args.prior in available() else args.prior)
    opt = BOOptimizer(atoms, restart=None if args.restart is None else str(args.restart),
                      logfile=args.logfile, prior=prior, kappa=args.kappa,
                      maxstep=args.maxstep,
                      trajectory=None if args.trajectory is None else str(args.trajectory))
    converged = opt.run(fmax=args.fmax, steps=args.steps)
    output = args.output or args.file.with_name(f"{args.file.stem}_relaxed.xyz")
    write(output, atoms)
    print(f"{'converged' if converged else 'not converged'} after {opt.nsteps} steps; "
          f"energy {atoms.get_potential_energy():.6f} eV; written to {output}")
    return 0 if converged else 1
