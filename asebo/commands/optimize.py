"""Relax a molecule from a structure file with BOOptimizer.

Logs, for every step, the time, the energy, the largest force and the energy the
GP predicted for that configuration. Writes the relaxed structure to ``--output``
(default: FILE's stem with ``_relaxed.xyz``), in the format its suffix names
(``.xyz``: extended XYZ, with the energy and forces, whatever the name holds: ASE
alone would write ``POSCAR_relaxed.xyz`` as a POSCAR), or for a name without one
in the format ASE tells from it (``CONTCAR``). An existing output, ``--hessian`` or
``--trajectory`` file is kept unless ``--force``, except what an earlier run on the
same ``--restart`` file wrote, told by its content: a structure at a configuration the
restart file holds and the model's Hessian at one (or a (3N, 3N) array), which the run
that goes on replaces, and a trajectory of its calls, which it continues.
``--threads`` sets the threads of the optimizer's own work (:mod:`asebo.threads`).
``--hessian FILE`` also writes the model's vibrations at the end
(:meth:`asebo.BOOptimizer.vibrations`) to a ``.json`` file, or its Hessian
(:meth:`asebo.BOOptimizer.hessian`) to a ``.npy`` file, and prints the run's verdict
on the model's curvature, the log's line at convergence.

Exit status: 0 converged; 1 not converged (the same command with the same
``--restart`` goes on); 2 the input refused before any calculator call (a file ASE
cannot read, no atoms, an unusable restart file, an ``--fmax``, ``--steps`` or
``--threads`` that cannot be, an existing file of another run without ``--force``, a
``--hessian`` suffix other than ``.json`` or ``.npy``, an output name whose format ASE
cannot tell, or whose format cannot hold the structure (a molecule as a POSCAR), an
output, Hessian, log, trajectory or restart file that cannot be written there,
two of these files (FILE or ``--observations`` among them) that are one file,
``--observations`` that cannot be read, are not of this molecule or hold no
forces); 3 a run stopped by its calculator (an element it does not know, say) or by
a file it could not write (a full disk); 130 interrupted by Ctrl-C. Each stop prints
one line, with the number of observations the restart file holds, read back from it.
"""

import argparse
import errno
import math
import os
import traceback
from pathlib import Path

import numpy as np
from ase import units

from asebo.commands import FAILED, REFUSED, CommandExit
from asebo.commands._formats import check_output_holds, output_format, read_format, write_structures
from asebo.commands._kept_files import at_configuration, check_kept, holds_calls, holds_hessian
from asebo.model.prior_names import AUTO, MODEL_PRIORS
from calculators import available, get_calculator

HESSIAN_SUFFIXES = (".json", ".npy")
"""The files ``--hessian`` writes: ASE's vibrations, or the Hessian as an array."""


def calculator_preset(spec):
    """The type of ``--calc``: a preset's name with its options, ``gfn2`` or
    ``gfn2:charge=1`` (:func:`calculators.parse_preset`, any case), refused by argparse
    where the name or an option is unknown; the text as given."""
    from calculators.presets import check_options, parse_preset

    try:
        check_options(*parse_preset(spec))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return spec


PRESET_HELP = (
    f"calculator preset, one of {', '.join(available())}, with its options as "
    "name:key=value,... (gfn2:charge=1, gpaw:h=0.25)"
)


def add_arguments(parser):
    parser.add_argument("file", type=Path, help="any structure file ASE reads")
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
    add_threads_option(parser)
    parser.add_argument("--logfile", default="-")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite existing output, Hessian and trajectory files (without it, only those "
        "an earlier run on the same --restart wrote are taken over)",
    )


def _one_line(error):
    """The message of ``error`` on one line."""
    return " ".join(str(error).split())


def failed_calculator(calc, error):
    """Whose ``error`` it is, in words: the prior calculator's (a
    :class:`asebo.model.priors.PriorCalculationError`) or the ``--calc`` preset's."""
    from asebo.model.priors import PriorCalculationError

    if isinstance(error, PriorCalculationError):
        return "the prior calculator"
    return f"the {calc} calculator"


def _refuse(message):
    """The stop of input refused before any call, with ``message``."""
    return CommandExit(message, REFUSED)


def _check_options(args, output):
    """Refuse a threshold, step count or file the run could not use, before any call."""
    _check_distinct(args, output)
    if not (math.isfinite(args.fmax) and args.fmax > 0):
        raise _refuse(f"--fmax must be a positive force in eV/Å, got {args.fmax}")
    if args.steps < 0:
        raise _refuse(f"--steps must be 0 or more, got {args.steps}")
    if args.threads is not None and args.threads < 1:
        raise _refuse(f"--threads must be 1 or more, got {args.threads}")
    if args.hessian is not None and args.hessian.suffix not in HESSIAN_SUFFIXES:
        raise _refuse(
            f"--hessian {args.hessian}: name it .json (ASE's VibrationsData) or .npy (the "
            "(3N, 3N) Hessian in eV/Å²)"
        )
    kept = {
        "--output": (output, at_configuration),
        "--hessian": (args.hessian, holds_hessian),
        "--trajectory": (args.trajectory, holds_calls),
    }
    check_kept(kept, args.force, args.restart)
    files = {
        "--output": output,
        "--trajectory": args.trajectory,
        "--restart": args.restart,
        "--hessian": args.hessian,
    }
    if args.logfile != "-":
        files["--logfile"] = Path(args.logfile)
    for option, path in files.items():
        problem = None if path is None else _why_unwritable(path)
        if problem is not None:
            raise _refuse(f"{option} {path}: {problem}")
    _check_output_format(output)


def _check_distinct(args, output):
    """Refuse two of the files the command reads or writes that are one file
    (:func:`asebo.optimize.system_checks.check_distinct_files`)."""
    from asebo.optimize.system_checks import check_distinct_files

    files = {
        "FILE": args.file,
        "--output": output,
        "--restart": args.restart,
        "--trajectory": args.trajectory,
        "--logfile": args.logfile,
        "--hessian": args.hessian,
        "--observations": args.observations,
    }
    try:
        check_distinct_files(**files)
    except ValueError as error:
        raise _refuse(_one_line(error)) from error


def _why_unwritable(path):
    """Why the file ``path`` cannot be written, or None where it can.

    The folder must exist and be writable (the restart file is replaced through a
    new file beside it), and an existing file writable. A superuser may write
    wherever the mode bits say no, but not in a read-only file system: ``os.access``
    answers for the user who runs the command.
    """
    folder = path.absolute().parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist; create it first"
    if path.is_dir():
        return "is a folder: give a file name inside it"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} cannot be written to: choose a folder you can write to"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file cannot be written: make it writable, or choose another name"
    return None


def _check_output_format(output):
    """Refuse an ``--output`` name whose format (:func:`asebo.commands._formats.output_format`)
    ASE cannot tell or write."""
    from ase.io.formats import UnknownFileTypeError, get_ioformat

    try:
        writable = get_ioformat(output_format(output)).can_write
    except UnknownFileTypeError:
        writable = False
    if not writable:
        raise _refuse(
            f"--output {output}: ASE cannot tell from its name a format it writes; name "
            "it .xyz, .extxyz, .traj, .json or another suffix of ase.io.write"
        )


def run(args):
    # the optimizer brings PyTorch and BoTorch, ase.io a second: imported here, not for --help

    output = args.output or args.file.with_name(f"{args.file.stem}_relaxed.xyz")
    _check_options(args, output)
    atoms = _read_structure(args.file)
    check_output_holds(output, atoms)
    atoms.calc = get_calculator(args.calc)
    opt = _optimizer(args, atoms)
    converged = _relax(args, opt)
    _write_result(output, lambda: write_structures(output, atoms), _where_the_result_is(args))
    print(f"{opt.summary()}; written to {output}{'' if converged else _going_on(args.restart)}")
    if args.hessian is not None:
        _write_vibrations(opt, args.hessian, _where_the_hessian_is(args, output))
    return 0 if converged else 1


def _going_on(restart):
    """How an unconverged run goes on, as the end of its line."""
    if restart is None:
        return "; pass --restart to go on later without repeating its calls"
    return f"; the same command goes on from {restart}"


def _read_structure(path):
    """The structure of the file ``path`` (its last frame where it holds several, as
    ASE reads it: a trajectory's last configuration) in its
    :func:`asebo.commands._formats.read_format`, or a refusal in one line."""
    import ase.io

    try:
        atoms = ase.io.read(path, format=read_format(path))
    except Exception as error:  # any reader's error, in one line
        raise _refuse(f"cannot read {path}: {_one_line(error)}") from error
    if isinstance(atoms, list):
        raise _refuse(f"{path} holds no structure: give a file with one molecule")
    return atoms


def _optimizer(args, atoms):
    """The BOOptimizer of the options, or a refusal in one line before any call."""
    from asebo.model.priors import resolve_prior
    from asebo.optimize import BOOptimizer, RestartError

    prior = resolve_prior(args.prior, atoms.calc)
    try:
        return BOOptimizer(
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
        raise _refuse(f"{args.file}: {_one_line(error)}") from error


def _relax(args, opt):
    """Whether ``opt`` converged; a failure or Ctrl-C stops the command with one line
    that says what the restart file keeps."""
    try:
        return opt.run(fmax=args.fmax, steps=args.steps)
    except KeyboardInterrupt as interrupt:
        raise KeyboardInterrupt(
            f"asebo optimize: interrupted at step {opt.nsteps}{_kept(args.restart)}"
        ) from interrupt
    except Exception as error:  # the calculator's own errors, or a file not written
        unwritten = _file_not_written(args, opt, error)
        if unwritten is not None:
            reason = error.strerror or _one_line(error)
            message = f"could not write {unwritten}: {reason}{_kept(args.restart, ' saved before')}"
        else:
            message = (
                f"{failed_calculator(args.calc, error)} failed on {args.file}: "
                f"{type(error).__name__}: "
                f"{_one_line(error)}{_kept(args.restart, ' so far')}"
            )
        raise CommandExit(message, FAILED) from error


WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
"""The errors of the operating system that only a write meets: a full disk or
quota, a file larger than the limit, a read-only file system."""


def _file_not_written(args, opt, error):
    """The file whose writing raised ``error``, or None where it is no such error.

    The restart file and the trajectory are told by the optimizer's objects that
    were writing them when ``error`` was raised (the innermost frame first); another
    file by the error's file name, for the errors of :data:`WRITE_ERRORS`.
    """
    if not isinstance(error, OSError):
        return None
    writers = {id(opt.observations): args.restart}
    if opt.frames is not None:
        writers[id(opt.frames)] = args.trajectory
    for frame, _ in reversed(list(traceback.walk_tb(error.__traceback__))):
        writer = id(frame.f_locals.get("self"))
        if writer in writers:
            return writers[writer]
    if error.errno in WRITE_ERRORS:
        return error.filename or "a file"
    return None


def _kept(restart, which=""):
    """What the restart file keeps, read back from it, as the end of a line: ``'; the 4
    observations are kept in r.json (...)'`` (``which`` after ``observations``); empty
    where the file holds none, a hint to pass ``--restart`` where there is none."""
    from asebo.optimize.observations import RestartError, check_restart

    if restart is None:
        return "; pass --restart to keep observations"
    try:
        stored = check_restart(os.fspath(restart))
    except RestartError as error:
        return f"; {_one_line(error)}"
    saved = 0 if stored is None else len(stored["energies"])
    if not saved:
        return ""
    counted = f"{saved} observation{'s' if saved > 1 else ''}{which} {'are' if saved > 1 else 'is'}"
    return f"; the {counted} kept in {restart} (run again to resume)"


def _where_the_result_is(args):
    """Where the relaxed structure is kept when ``--output`` cannot be written."""
    if args.restart is not None:
        return (
            f"the relaxed structure is kept in {args.restart}: run again with the same "
            "--restart and another --output to write it without a call"
        )
    if args.trajectory is not None:
        return f"the relaxed structure is the last frame of {args.trajectory}"
    return "the relaxed structure is lost: pass --restart to keep it"


def _where_the_hessian_is(args, output):
    """What is kept when ``--hessian`` cannot be written."""
    again = (
        "; run again with the same --restart and another --hessian to write it without a call"
        if args.restart is not None
        else ""
    )
    return f"the relaxed structure is written to {output}{again}"


def add_threads_option(parser):
    """The ``--threads`` option of the commands that run an optimizer."""
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of the optimizer's own linear algebra, between the calculator's calls "
        "(default: OMP_NUM_THREADS where set, else 1; the calculator keeps its own)",
    )


def _write_result(path, write, kept):
    """Call ``write``, which writes ``path``; a failure stops the command with one line
    that says where the result is (``kept``)."""
    try:
        write()
    except OSError as error:
        raise CommandExit(
            f"could not write {path}: {error.strerror or _one_line(error)}; {kept}", FAILED
        ) from error


def _write_vibrations(opt, path, kept):
    """Write the model's vibrations at the lowest configuration to ``path`` and say so,
    with the run's verdict on the model's curvature."""
    result = opt.model_hessian()
    curvature, vibrations = result.curvature, result.vibrations()

    def write():
        path.unlink(missing_ok=True)  # ASE's writer refuses an existing file
        if path.suffix == ".npy":
            np.save(path, result.hessian)  # (3N, 3N), eV/Å², atom-major
        else:
            vibrations.write(str(path))

    _write_result(path, write, kept)
    wavenumbers = vibrations.get_energies() / units.invcm
    # the rigid motions, projected out, sit at zero
    real = wavenumbers.real[(wavenumbers.imag == 0) & (wavenumbers.real > 1.0)]
    lowest = f"{real.min():.0f} cm⁻¹" if len(real) else "none"
    verdict = (
        f"at convergence, {opt.curvature_verdict}"
        if opt.curvature_verdict is not None
        else f"the Hessian written: {curvature.summary()}"
    )
    print(
        f"model {'Hessian' if path.suffix == '.npy' else 'vibrations'} written to {path}: "
        f"lowest real frequency {lowest}, zero-point "
        f"energy {vibrations.get_zero_point_energy():.4f} eV; {verdict}"
    )
