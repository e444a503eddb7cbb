"""Find and check the transition state between two minima: a band, a saddle search, a check.

INITIAL and FINAL are two minima, relaxed beforehand (``asebo optimize``): the same
atoms in the same order, and the same cell. :func:`asebo.barrier.transition_state`
relaxes a band of ``--images`` moving images between them with BONEB to a loose
``--band-fmax``, searches the saddle point from its highest image with BOSaddle to
``--fmax`` (for one atom, the band's climbing image converges instead), every call
of the band taken by the search, and checks it: one imaginary mode in the Hessian at the
end (``--hessian model``, the GP's, no call; ``calculator``, finite differences), and a
descent either way along that mode ending at INITIAL and at FINAL within ``--tolerance``
Å (RMSD; ``--descent model``, on the GP, the calculator computing where the GP is
unsure; ``calculator``, BFGS with the calculator). One calculator of the ``--calc``
preset computes every configuration; the band's and the search's step lines go to the
screen (``--logfile``). The saddle point is written to ``--output`` (default: INITIAL's
stem with ``_ts.xyz``, extended XYZ whatever the stem; a suffix that names a format is
written in it) with its energy and forces. The last line says what was found:
the verdict, the barriers forward and backward, the imaginary frequency and the calls of
each stage. An existing output is kept unless ``--force``, except the saddle point an
earlier run of the same ``--restart`` wrote, which the run that goes on replaces.

Exit status: 0 a first-order saddle point joining INITIAL and FINAL; 1 not (the last
line says why; where a stage ran out of ``--steps``, the same command with the same
``--restart`` goes on); 2 the input refused before any calculator call (a file ASE
cannot read, two minima of other atoms or cells or one configuration twice, an unusable
restart file, an ``--fmax``, ``--band-fmax``, ``--steps``, ``--images`` or
``--tolerance`` that cannot be, an existing output without ``--force``, an output name
whose format ASE cannot tell or that cannot hold the structure, a file that cannot be
written there (INITIAL and FINAL are only read), two files that are one, INITIAL and
FINAL among them); 3 a run stopped by its calculator or by a file it
could not write; 130 interrupted by Ctrl-C. Each stop prints one line, with what the
restart files keep.
"""

import math
from pathlib import Path

from asebo.commands import FAILED, CommandExit
from asebo.commands._barrier_run import check_distinct, check_writable, driver, kept
from asebo.commands._formats import check_output_holds, write_structures
from asebo.commands._kept_files import at_configuration, restart_state
from asebo.commands.optimize import (
    PRESET_HELP,
    _check_output_format,
    _one_line,
    _read_structure,
    _refuse,
    _write_result,
    calculator_preset,
    failed_calculator,
)
from asebo.model.prior_names import AUTO, MODEL_PRIORS
from calculators import available, get_calculator

SURFACES = ("model", "calculator")
"""What the check's Hessian and descents are computed on."""

NOUN = "configurations computed"
"""What the restart files keep, in the command's lines."""


def add_arguments(parser):
    parser.add_argument("initial", type=Path, help="the first minimum: a structure file ASE reads")
    parser.add_argument("final", type=Path, help="the second minimum: the same atoms, in order")
    parser.add_argument(
        "--calc",
        default="gfn2",
        type=calculator_preset,
        help=f"{PRESET_HELP} of every configuration (default: gfn2, GFN2-xTB)",
    )
    parser.add_argument(
        "--prior",
        default=None,
        choices=[*MODEL_PRIORS, AUTO, *available()],
        help="the GP's prior mean of the band and the saddle search (default: each one's "
        "own): a model prior, auto, or a calculator preset",
    )
    parser.add_argument("--images", type=int, default=5, help="moving images of the band")
    parser.add_argument("--fmax", type=float, default=0.05, help="eV/Å, of the saddle point")
    parser.add_argument(
        "--band-fmax", type=float, default=1.0, help="eV/Å, of the band before the search"
    )
    parser.add_argument(
        "--steps", type=int, default=200, help="calls at most of the band, and of the search"
    )
    parser.add_argument(
        "--hessian",
        default="model",
        choices=SURFACES,
        help="the check's Hessian: the GP's (no call) or the calculator's finite differences",
    )
    parser.add_argument(
        "--descent",
        default="model",
        choices=SURFACES,
        help="the check's descents along the imaginary mode: on the GP, the calculator "
        "computing where it is unsure, or with the calculator",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.25,
        help="Å: a descent's end this close (RMSD) to a minimum is at it",
    )
    parser.add_argument(
        "--restart",
        type=Path,
        default=None,
        help="stem of the restart files (STEM-band.json, STEM-saddle.json): read if present, "
        "written after every call",
    )
    parser.add_argument("--logfile", default="-")
    parser.add_argument("--output", type=Path, default=None, help="the saddle point")
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing output (without it, only the saddle point an earlier run "
        "of the same --restart wrote is replaced)",
    )


def run(args):
    # the workflow brings PyTorch and Sella: imported here, not for --help

    output = args.output or args.initial.with_name(f"{args.initial.stem}_ts.xyz")
    restarts = _restart_files(args.restart)
    _check_options(args, output, restarts)
    initial, final = _read_structure(args.initial), _read_structure(args.final)
    check_output_holds(output, initial)
    calculator = _calculator(args, initial, final)
    result = _run(args, initial, final, calculator, restarts)
    _write_result(output, lambda: write_structures(output, result.atoms), _where_kept(restarts))
    print(f"{result.summary()}; written to {output}")
    return 0 if result.verified else 1


def _restart_files(stem):
    """The band's and the saddle search's restart files of ``--restart STEM``, or Nones."""
    if stem is None:
        return None, None
    return (stem.with_name(f"{stem.name}-band.json"), stem.with_name(f"{stem.name}-saddle.json"))


def _check_options(args, output, restarts):
    """Refuse a number, output or file the run could not use, before any call."""
    written = {
        "--output": output,
        "--restart (band)": restarts[0],
        "--restart (saddle)": restarts[1],
        "--logfile": args.logfile,
    }
    check_distinct({"INITIAL": args.initial, "FINAL": args.final, **written})
    for option, value in (
        ("--fmax", args.fmax),
        ("--band-fmax", args.band_fmax),
        ("--tolerance", args.tolerance),
    ):
        if not (math.isfinite(value) and value > 0):
            raise _refuse(f"{option} must be a positive number, got {value}")
    if args.steps < 1:
        raise _refuse(f"--steps must be 1 or more, got {args.steps}")
    if args.images < 1:
        raise _refuse(f"--images must be 1 or more (the moving images), got {args.images}")
    if output.exists() and not (args.force or _written_by_a_stage(output, restarts)):
        raise _refuse(f"{output} exists: pass --force to overwrite it, or --output another name")
    check_writable(written)
    _check_output_format(output)


def _written_by_a_stage(output, restarts):
    """Whether ``output`` is at a configuration the band's or the search's restart file
    computed: the saddle point an earlier run on them wrote, which the run that goes on
    replaces. A restart file that cannot be read is refused with its reason."""
    states = [restart_state(path) for path in restarts if path is not None]
    return any(stored is not None and at_configuration(output, stored) for stored in states)


def _calculator(args, initial, final):
    """The ``--calc`` preset, refused in one line where the minima are not two of one
    system; a molecule under a preset that puts it in a box takes the one box that holds
    the whole IDPP band (:func:`asebo.benchmarks.neb.one_box`)."""
    from asebo.barrier.band_setup import check_endpoints
    from asebo.benchmarks.neb import idpp_band, one_box

    subject = f"{args.initial}, {args.final}"
    driver(lambda: check_endpoints(initial, final, get_calculator("emt"), args.images), subject)
    try:
        positions = idpp_band(initial, final, args.images)  # (i, n, 3)
    except Exception as error:  # IDPP's own failures, in one line
        raise _refuse(f"cannot interpolate the band: {_one_line(error)}") from error
    return one_box(lambda **options: get_calculator(args.calc, **options), positions)()


def _run(args, initial, final, calculator, restarts):
    """The :class:`asebo.barrier.TransitionState` of the options. What the workflow
    refuses before any call is refused in one line; a failure after a call or Ctrl-C
    stops the command with one line that says what the restart files keep."""
    from asebo.barrier import transition_state
    from asebo.barrier.counted import CountedCalls
    from asebo.model.priors import resolve_prior
    from asebo.optimize.observations import RestartError

    counted = CountedCalls(calculator)
    options = {
        "n_images": args.images,
        "fmax": args.fmax,
        "band_fmax": args.band_fmax,
        "steps": args.steps,
        "prior": resolve_prior(args.prior, calculator),
        "hessian": args.hessian,
        "descent": args.descent,
        "tolerance": args.tolerance,
        "restart": None if args.restart is None else str(args.restart),
        "logfile": args.logfile,
    }
    refused = (ValueError, TypeError, PermissionError, RestartError, FileNotFoundError, ImportError)
    try:
        return transition_state(initial, final, counted, **options)
    except KeyboardInterrupt as interrupt:
        raise KeyboardInterrupt(f"asebo ts: interrupted{_kept(restarts)}") from interrupt
    except refused as error:
        if counted.calls == 0:
            raise _refuse(f"{args.initial}, {args.final}: {_one_line(error)}") from error
        raise _failed(args, error, restarts) from error
    except Exception as error:
        raise _failed(args, error, restarts) from error


def _failed(args, error, restarts):
    """The stop of a run after its first call: a file not written, or the calculator's
    own error."""
    if isinstance(error, OSError):
        reason = error.strerror or _one_line(error)
        return CommandExit(
            f"could not write {error.filename or 'a file'}: {reason}"
            f"{_kept(restarts, ' saved before')}",
            FAILED,
        )
    return CommandExit(
        f"{failed_calculator(args.calc, error)} failed: {type(error).__name__}: "
        f"{_one_line(error)}"
        f"{_kept(restarts, ' so far')}",
        FAILED,
    )


def _kept(restarts, which=""):
    """What the restart files keep, as the end of a line."""
    band, saddle = restarts
    if band is None:
        return f"; pass --restart to keep the {NOUN}"
    return "".join(
        kept(path, NOUN, which) for path in (band, saddle) if path.is_file() or path is band
    )


def _where_kept(restarts):
    """Where the result is when the output cannot be written."""
    if restarts[0] is None:
        return f"pass --restart to keep the {NOUN}"
    return (
        f"the {NOUN} are kept in {restarts[0]} and {restarts[1]}: run again with another --output"
    )
