"""The structure formats of the commands' files: the format a file name says, the result
files written in it, and the check before any call that it holds the structure.

ASE tells a format first from names it knows whatever their suffix: a name holding
POSCAR, CONTCAR, OUTCAR or XDATCAR is VASP's, so that ``POSCAR_relaxed.xyz`` would be
written as a POSCAR. A suffix that names a format (``.xyz``, extended XYZ; ``.traj``;
``.vasp``) is taken first here, in writing and in reading.
"""

import tempfile
import warnings
from pathlib import Path

import numpy as np

from asebo.commands import REFUSED, CommandExit

STORABLE_INFO = (str, int, float, bool, list, tuple, np.number, np.ndarray)
"""The kinds of ``atoms.info`` values every structure format of ASE writes; others (the
``adsorbate_info`` dict of :func:`ase.build.add_adsorbate`) are left out of a result
file, with no warning."""


def suffix_format(path):
    """The name of ASE's format the suffix of ``path`` names (``.xyz``: ``'extxyz'``,
    ``.vasp``: ``'vasp'``; a compression's suffix, ``.gz``, looked through), or None
    where it names none."""
    from ase.io.formats import extension2format, get_compression, ioformats

    root, _ = get_compression(str(path))
    suffix = Path(root).suffix[1:].lower()
    if suffix in extension2format:
        return extension2format[suffix].name
    return suffix if suffix in ioformats else None


def output_format(path):
    """The format ``path`` is written in: the one its suffix names, else the one ASE
    tells from the whole name (``CONTCAR``); :class:`ase.io.formats.UnknownFileTypeError`
    where neither tells one."""
    from ase.io.formats import filetype

    return suffix_format(path) or filetype(Path(path), read=False)


def read_format(path):
    """The format ``path`` is read in: the one its suffix names where ASE would tell
    another from the name (``POSCAR_relaxed.xyz``), else None, ASE's own guess from the
    name and the content."""
    from ase.io.formats import UnknownFileTypeError, filetype

    named = suffix_format(path)
    try:
        told = filetype(Path(path), read=False)
    except UnknownFileTypeError:
        return named
    return None if told == named else named


def write_structures(path, frames):
    """Write ``frames`` (atoms or a list of them) to ``path`` with ASE in its
    :func:`output_format`, their ``info`` entries of other kinds than
    :data:`STORABLE_INFO` left out of the file (the atoms keep them)."""
    import ase.io

    many = isinstance(frames, (list, tuple))
    frames = list(frames) if many else [frames]
    kept = []
    for frame in frames:
        left = {k: v for k, v in frame.info.items() if not isinstance(v, STORABLE_INFO)}
        kept.append(left)
        for key in left:
            del frame.info[key]
    try:
        ase.io.write(path, frames if many else frames[0], format=output_format(path))
    finally:
        for frame, left in zip(frames, kept):
            frame.info.update(left)


def check_output_holds(output, frames):
    """Refuse an ``--output`` whose format cannot hold ``frames`` (atoms, or a list of
    them for a band), before any call: they are written, with zero energy and forces as
    the result has them, to a file of the same name in a temporary folder.

    VASP's, LAMMPS' and Quantum ESPRESSO's input formats need a cell, say, which a
    molecule has not; the reason ASE gives is in the line.
    """
    many = isinstance(frames, (list, tuple))
    trial = [_with_results(frame) for frame in (frames if many else [frames])]
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the writer's warnings on the way to its error
        try:
            write_structures(Path(folder) / Path(output).name, trial if many else trial[0])
        except Exception as error:  # any writer's error, in one line
            reason = " ".join(f"{type(error).__name__}: {error}".split())
            raise CommandExit(
                f"--output {output}: ASE cannot write this structure as "
                f"{output_format(output)} ({reason}): name it .xyz or .traj, which hold any "
                "structure with its energy and forces",
                REFUSED,
            ) from error


def _with_results(atoms):
    """A copy of ``atoms`` with zero energy and forces, as a result file holds them."""
    from ase.calculators.singlepoint import SinglePointCalculator

    copy = atoms.copy()
    copy.calc = SinglePointCalculator(copy, energy=0.0, forces=np.zeros((len(copy), 3)))
    return copy
