"""Search a first-order saddle point from a guess in a structure file with BOSaddle.

GUESS is a structure near the transition state, whose calculator is the ``--calc``
preset. BOSaddle (:class:`asebo.saddle.BOSaddle`) walks on its GP towards
the model's saddle point and computes where the walk ends, one call a step, its log on
the screen (``--logfile``). The configuration where the search ends is written to
``--output`` (default: GUESS's stem with ``_saddle.xyz``) with its energy and forces, and
the last line says how it ended (:meth:`asebo.saddle.BOSaddle.summary`): the calls, the
verdict of :attr:`asebo.saddle.BOSaddle.result` (a first-order saddle point by the
model, or why not: a minimum, a saddle point of higher order, the steps) and the model's
imaginary frequency there. An existing output or ``--trajectory`` is kept unless
``--force``, except what an earlier run on the same ``--restart`` file wrote, told by its
content: a structure at a configuration the restart file holds, which the run that goes
on replaces, and a trajectory of its calls, which it continues. The output is written in
the format its suffix names (``.xyz``: extended XYZ, ``POSCAR_saddle.xyz`` too).

Exit status: 0 converged at a first-order saddle point by the model; 1 not converged
(the same command with the same ``--restart`` goes on where its steps ran out); 2 the
input refused before any calculator call (a file ASE cannot read, what BOSaddle refuses:
one atom, atoms on top of one another; an unusable restart file, an ``--fmax``,
``--steps`` or ``--threads`` that cannot be, an existing file of another run without
``--force``, an output name of no format ASE writes or of a format that cannot hold the
structure, a file that cannot be written there (GUESS is only read), two files that are
one, GUESS among them); 3 a run stopped by its calculator or by a file it
could not write; 130 interrupted by Ctrl-C. Each stop prints one line, with the number
of configurations the restart file keeps.
"""

from pathlib import Path

import numpy as np

from asebo.commands._barrier_run import (
    add_run_options,
    check_distinct,
    check_numbers,
    check_writable,
    driver,
    run_driver,
    where_kept,
)
from asebo.commands._formats import check_output_holds, write_structures
from asebo.commands._kept_files import at_configuration, check_kept, holds_calls
from asebo.commands.optimize import (
    PRESET_HELP,
    _check_output_format,
    _going_on,
    _read_structure,
    _write_result,
    calculator_preset,
)
from asebo.model.prior_names import AUTO, MODEL_PRIORS
from calculators import available, get_calculator

NOUN = "configurations computed"
"""What the restart file keeps, in the command's lines."""


def add_arguments(parser):
    parser.add_argument("guess", type=Path, help="a structure file ASE reads: the guess")
    parser.add_argument(
        "--calc",
        default="gfn2",
        type=calculator_preset,
        help=f"{PRESET_HELP} (default: gfn2, GFN2-xTB)",
    )
    parser.add_argument(
        "--prior",
        default=None,
        choices=[*MODEL_PRIORS, AUTO, *available()],
        help="the GP's prior mean (default: the pair springs for a periodic cell; for a "
        "molecule auto, GFN2-xTB under another calculator, the other GFN-xTB method under "
        "tblite, else the Lindh model): a model prior, auto, or a calculator preset",
    )
    parser.add_argument("--fmax", type=float, default=0.05, help="eV/Å")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--trajectory", type=Path, default=None, help="every configuration computed"
    )
    add_run_options(parser)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite existing output and trajectory files (without it, only those an "
        "earlier run on the same --restart wrote are taken over)",
    )


def run(args):
    # BOSaddle brings PyTorch and Sella: imported here, not for --help

    output = args.output or args.guess.with_name(f"{args.guess.stem}_saddle.xyz")
    _check_options(args, output)
    atoms = _read_structure(args.guess)
    check_output_holds(output, atoms)
    atoms.calc = get_calculator(args.calc)
    opt = _search(args, atoms)
    converged = run_driver(
        opt, args, lambda: f"asebo saddle: interrupted at step {opt.nsteps}", args.guess, NOUN
    )
    found = _where_it_ends(opt)
    _write_result(output, lambda: write_structures(output, found), where_kept(args.restart, NOUN))
    print(f"{opt.summary()}; written to {output}{'' if converged else _going_on(args.restart)}")
    return 0 if converged else 1


def _check_options(args, output):
    """Refuse a number, output or file the search could not use, before any call."""
    written = {
        "--output": output,
        "--restart": args.restart,
        "--trajectory": args.trajectory,
        "--logfile": args.logfile,
    }
    check_distinct({"GUESS": args.guess, **written})
    check_numbers(args)
    kept = {
        "--output": (output, at_configuration),
        "--trajectory": (args.trajectory, holds_calls),
    }
    check_kept(kept, args.force, args.restart)
    check_writable(written)
    _check_output_format(output)


def _search(args, atoms):
    """The BOSaddle of the options, or a refusal in one line before any call."""
    from asebo.model.priors import resolve_prior
    from asebo.saddle import BOSaddle

    return driver(
        lambda: BOSaddle(
            atoms,
            restart=None if args.restart is None else str(args.restart),
            logfile=args.logfile,
            trajectory=None if args.trajectory is None else str(args.trajectory),
            prior=resolve_prior(args.prior, atoms.calc),
            threads=args.threads,
        ),
        args.guess,
    )


def _where_it_ends(opt):
    """The atoms where the search ends with the energy and forces computed there, from
    the search's record: no call."""
    from ase.calculators.singlepoint import SinglePointCalculator

    observations = opt.observations
    index = observations.find(opt.atoms.positions)
    if index is None:  # not computed where it stands: the latest computed
        index = len(observations) - 1
    found = opt.atoms.copy()
    found.positions = np.array(observations.positions[index])
    found.calc = SinglePointCalculator(
        found,
        energy=float(observations.energies[index]),
        forces=np.array(observations.forces[index]),
    )
    return found
