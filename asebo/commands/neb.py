"""Optimize a nudged elastic band between two structure files with BONEB.

INITIAL and FINAL are the band's endpoints, relaxed beforehand (``asebo optimize``): the
same atoms in the same order, and the same cell. ``--images`` moving images are put
between them (``--interpolate``: ASE's IDPP path by default, or the straight line), each
image takes its own calculator of the ``--calc`` preset, and BONEB
(:class:`asebo.neb.BONEB`) relaxes the band with one call of one moving image per step,
its log on the screen (``--logfile``). ``--climb`` turns on the climbing image, which
converges on the saddle point. The band is written to ``--output`` (default: INITIAL's
stem with ``_band.xyz``, extended XYZ whatever the stem: ``POSCAR_band.xyz`` too; a
suffix that names a format is written in it), every image with its energy and forces
and, with ``--restart``, the run's mark (``info['asebo_run']``), and the picture of its
energy profile to ``--plot`` (default: the output's name with ``.png``; ``--no-plot``
for none): each image's energy along the path, ASE's spline through them, and the GP's
energy between the images. The last line says how the band ended
(:meth:`asebo.neb.BONEB.summary`): the calls of the moving images, the barrier (the
highest image above INITIAL) and the largest NEB force. An existing output, picture or
``--trajectory`` is kept unless ``--force``, except what an earlier run on the same
``--restart`` file wrote, told by its content: a band that bears the run's mark, or
that the restart file holds, or of which it computed an image at its place (the band
where a run ended, which the run that goes on after Ctrl-C replaces); the picture that
bears the mark in its metadata; a trajectory of bands between the restart file's
endpoints, which the run continues.

Exit status: 0 converged; 1 not converged (the same command with the same ``--restart``
goes on); 2 the input refused before any calculator call (a file ASE cannot read, two
endpoints of other atoms or cells, an unusable restart file, an ``--fmax``,
``--steps``, ``--images`` or ``--threads`` that cannot be, an existing file of another
run without ``--force``, an output name of a format that holds one structure or none ASE
writes, or whose format cannot hold the band, a picture name matplotlib does not write
or no matplotlib, a file that cannot be written there (INITIAL and FINAL are only
read), two files that are one, INITIAL and FINAL among them); 3 a run stopped by its
calculator or by a file it could not write; 130 interrupted by Ctrl-C. Each stop prints
one line, with the number of images computed the restart file keeps.
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
from asebo.commands._formats import check_output_holds, output_format, write_structures
from asebo.commands._kept_files import (
    MARK,
    check_kept,
    holds_band,
    holds_bands,
    holds_mark,
    run_mark,
)
from asebo.commands.optimize import (
    PRESET_HELP,
    _check_output_format,
    _going_on,
    _one_line,
    _read_structure,
    _refuse,
    _write_result,
    calculator_preset,
)
from asebo.model.prior_names import AUTO, MODEL_PRIORS
from calculators import available, get_calculator

INTERPOLATIONS = ("idpp", "linear")
"""How the moving images are first put between the endpoints (ASE's ``NEB.interpolate``)."""

PLOT_SUFFIXES = (".png", ".pdf", ".svg")
"""The picture's formats, by the suffix of ``--plot``."""

NOUN = "images computed"
"""What the restart file keeps, in the command's lines."""


def add_arguments(parser):
    parser.add_argument("initial", type=Path, help="the first endpoint: a structure file ASE reads")
    parser.add_argument("final", type=Path, help="the last endpoint: the same atoms, in order")
    parser.add_argument(
        "--calc",
        default="gfn2",
        type=calculator_preset,
        help=f"{PRESET_HELP} of every image (default: gfn2, GFN2-xTB)",
    )
    parser.add_argument(
        "--prior",
        default=None,
        choices=[*MODEL_PRIORS, AUTO, *available()],
        help="the GP's prior mean (default: the pair springs for a periodic cell; for a "
        "molecule GFN2-xTB under another calculator where it describes the molecule, "
        "else the highest energy computed): a model prior, auto, or a calculator preset",
    )
    parser.add_argument("--images", type=int, default=5, help="moving images between the ends")
    parser.add_argument(
        "--climb", action="store_true", help="a climbing image, which converges on the saddle"
    )
    parser.add_argument(
        "--interpolate", default="idpp", choices=INTERPOLATIONS, help="the first band"
    )
    parser.add_argument("--fmax", type=float, default=0.05, help="eV/Å, on every NEB force")
    parser.add_argument("--steps", type=int, default=500, help="calls of the moving images")
    parser.add_argument("--trajectory", type=Path, default=None, help="the band after each call")
    add_run_options(parser)
    parser.add_argument("--output", type=Path, default=None, help="the band, every image")
    picture = parser.add_mutually_exclusive_group()
    picture.add_argument(
        "--plot", type=Path, default=None, help="the band's energy profile (.png, .pdf, .svg)"
    )
    picture.add_argument("--no-plot", action="store_true", help="write no picture")
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite existing output, picture and trajectory files (without it, only those "
        "an earlier run on the same --restart wrote are taken over)",
    )


def run(args):
    # BONEB brings PyTorch, the picture matplotlib: imported here, not for --help
    output = args.output or args.initial.with_name(f"{args.initial.stem}_band.xyz")
    picture = None if args.no_plot else args.plot or output.with_suffix(".png")
    _check_options(args, output, picture)
    initial, final = _read_structure(args.initial), _read_structure(args.final)
    _check_endpoints(args, initial, final)
    check_output_holds(output, [initial, final])
    neb = _band(args, initial, final)
    opt = _optimizer(args, neb)
    converged = run_driver(
        opt, args, lambda: f"asebo neb: interrupted after {opt.calls} calls", "the band", NOUN
    )
    written = _write_band(opt, output, picture, args)
    print(f"{opt.summary()}; {written}{'' if converged else _going_on(args.restart)}")
    return 0 if converged else 1


def _check_options(args, output, picture):
    """Refuse a number, output or file the run could not use, before any call."""
    written = {
        "--output": output,
        "--plot": picture,
        "--restart": args.restart,
        "--trajectory": args.trajectory,
        "--logfile": args.logfile,
    }
    check_distinct({"INITIAL": args.initial, "FINAL": args.final, **written})
    check_numbers(args)
    if args.images < 1:
        raise _refuse(f"--images must be 1 or more (the moving images), got {args.images}")
    if picture is not None:
        _check_picture(picture)
    _check_kept(args, output, picture)
    check_writable(written)
    _check_output_format(output)
    _check_several_structures(output)


def _check_kept(args, output, picture):
    """Refuse an existing output, picture or trajectory without ``--force``, except what
    an earlier run on the same ``--restart`` file wrote (:mod:`asebo.commands._kept_files`):
    a band it held or that bears its mark, the picture that bears it, a trajectory of
    its bands."""

    def mark(stored):
        return run_mark(args.restart, stored)

    kept = {
        "--output": (output, lambda path, stored: holds_band(path, stored, mark(stored))),
        "--plot": (picture, lambda path, stored: holds_mark(path, mark(stored))),
        "--trajectory": (args.trajectory, holds_bands),
    }
    check_kept(kept, args.force, args.restart)


def _check_picture(picture):
    """Refuse a picture name of no format it is written in, or no matplotlib."""
    if picture.suffix.lower() not in PLOT_SUFFIXES:
        raise _refuse(
            f"--plot {picture}: name it {', '.join(PLOT_SUFFIXES)}, or pass --no-plot for none"
        )
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise _refuse(
            "--plot needs matplotlib: pip install matplotlib, or pass --no-plot for no picture"
        ) from error


def _check_several_structures(output):
    """Refuse an ``--output`` name whose format holds one structure: the band is several."""
    from ase.io.formats import get_ioformat

    if get_ioformat(output_format(output)).single:
        raise _refuse(
            f"--output {output}: its format holds one structure, and the band is several; "
            "name it .xyz, .traj or another format of several"
        )


def _check_endpoints(args, initial, final):
    """Refuse endpoints that are not the same atoms, in the same order, boundary
    conditions and cell, or that are one configuration."""
    from asebo.barrier.band_setup import (  # bring the optimizers: on use
        SAME_MINIMUM,
        same_system,
        system_difference,
    )
    from asebo.barrier.connection import rmsd

    if not same_system(initial, final):
        raise _refuse(
            f"{args.final} holds other atoms, boundary conditions or cell than {args.initial} "
            f"({system_difference(initial, final)}): give the same atoms in the same order "
            "and cell"
        )
    apart = rmsd(initial, final)
    if apart < SAME_MINIMUM:
        raise _refuse(
            f"{args.initial} and {args.final} are one configuration (RMSD {apart:.3f} Å): "
            "give the band's two ends"
        )


def _band(args, initial, final):
    """The NEB of ``--images`` moving images between the endpoints, interpolated, each
    image with its own calculator (one box for the images of a molecule under a preset
    that puts it in a box: :func:`asebo.benchmarks.neb.one_box`)."""
    from ase.mep import NEB

    from asebo.barrier.band_setup import interpolate
    from asebo.benchmarks.neb import one_box

    images = [initial] + [initial.copy() for _ in range(args.images)] + [final]
    neb = NEB(images, climb=args.climb, method="improvedtangent")
    try:
        interpolate(neb, args.interpolate)
    except Exception as error:  # IDPP's own failures, in one line
        raise _refuse(f"cannot interpolate the band: {_one_line(error)}") from error
    positions = np.array([image.positions for image in images])  # (i, n, 3)
    make = one_box(lambda **options: get_calculator(args.calc, **options), positions)
    for image in images:
        image.calc = make()
    return neb


def _optimizer(args, neb):
    """The BONEB of the options, or a refusal in one line before any call."""
    from asebo.model.priors import resolve_prior
    from asebo.neb import BONEB

    return driver(
        lambda: BONEB(
            neb,
            restart=None if args.restart is None else str(args.restart),
            logfile=args.logfile,
            trajectory=None if args.trajectory is None else str(args.trajectory),
            prior=resolve_prior(args.prior, neb.images[1].calc),
            threads=args.threads,
        ),
        f"{args.initial}, {args.final}",
    )


def _write_band(opt, output, picture, args):
    """Write the band and its picture, both bearing the run's mark where it has a
    restart file (:func:`asebo.commands._kept_files.run_mark`); the words of the summary
    line that say where."""

    from asebo.commands._band_plot import band_frames, write_band_plot

    frames, computed = band_frames(opt)
    mark = _written_mark(args.restart)
    if mark is not None:
        for frame in frames:
            frame.info[MARK] = mark
    kept = where_kept(args.restart, NOUN)
    _write_result(output, lambda: write_structures(output, frames), kept)
    if picture is None:
        return f"written to {output}"
    _write_result(picture, lambda: write_band_plot(picture, opt, frames, computed, mark), kept)
    return f"written to {output}, its picture to {picture}"


def _written_mark(restart):
    """The mark of the run on the restart file ``restart``, read after the run; None
    without one."""
    from asebo.optimize.observations import RestartError, check_restart

    if restart is None:
        return None
    try:
        return run_mark(restart, check_restart(str(restart)))
    except RestartError:  # a restart file no longer read: the files bear no mark
        return None
