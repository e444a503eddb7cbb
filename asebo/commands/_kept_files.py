"""The existing files a command writes over without ``--force``: only those a run on its
``--restart`` file wrote, each told by its content (:func:`check_kept`).

A run that goes on from its restart file replaces its result and continues its
trajectory; any other file, an unrelated one given the same name, is kept unless
``--force``. What a run wrote is told by what the restart file holds: a structure at a
configuration it computed, a trajectory of its calls or of its bands, a Hessian at one
of its configurations, or the mark a band writes into its images and picture
(:func:`run_mark`).
"""

import hashlib
import os
from pathlib import Path

import numpy as np

from asebo.commands import REFUSED, CommandExit

SAME = 1e-6
"""Å: two positions this close (any coordinate) are one."""

MARK = "asebo_run"
"""The ``info`` key of a band's images that holds the mark of its run (:func:`run_mark`)."""


def check_kept(files, force, restart):
    """Refuse an existing file of ``files`` without ``force``, unless a run on the
    restart file ``restart`` wrote it.

    Parameters
    ----------
    files : dict
        Option -> ``(path, ours)``: the path (or None), and ``ours(path, stored)``,
        whether a run on the restart file, whose content is ``stored``, wrote it.
    force : bool
        ``--force``: every file may be written over.
    restart : path or None
        The ``--restart`` file; read only where a file exists. One that cannot be read is
        refused with its reason.
    """
    existing = {
        option: (Path(path), ours)
        for option, (path, ours) in files.items()
        if path is not None and Path(path).exists()
    }
    if force or not existing:
        return
    stored = restart_state(restart)
    for option, (path, ours) in existing.items():
        if stored is None or not ours(path, stored):
            raise CommandExit(
                f"{path} exists: pass --force to overwrite it, or {option} another name", REFUSED
            )


def restart_state(restart):
    """The content of the restart file ``restart``, None where there is no name or no
    file; one that cannot be read is refused in one line."""
    from asebo.optimize.observations import RestartError, check_restart

    if restart is None:
        return None
    try:
        return check_restart(os.fspath(restart))
    except RestartError as error:
        raise CommandExit(" ".join(str(error).split()), REFUSED) from error


def at_configuration(path, stored):
    """Whether the structure file ``path`` (its last frame) is at a configuration the
    restart file computed: the result ``asebo optimize`` or ``asebo saddle`` wrote."""
    frames = _structures(path, -1)
    return bool(frames) and _computed(frames[0], stored) is not None


def holds_calls(path, stored):
    """Whether the trajectory ``path`` holds the restart file's first calls, one frame
    each in order, as BOOptimizer and BOSaddle write it (the frames that can be read: a
    write cut short is the run's too, and is mended by the optimizer)."""
    frames = _trajectory_frames(path)
    computed = _computed_positions(stored)
    if not frames or len(frames) > len(computed):
        return False
    return all(
        _same_atoms(frame, stored) and _same(frame.positions, positions)
        for frame, positions in zip(frames, computed)
    )


def holds_bands(path, stored):
    """Whether the trajectory ``path`` holds bands of the restart file's band, as BONEB
    writes them: one frame an image, every band between its endpoints."""
    frames = _trajectory_frames(path)
    if not frames or "band" not in stored or "endpoints" not in stored:
        return False
    count, ends = len(stored["band"]) + 2, np.asarray(stored["endpoints"], dtype=float)
    for k, frame in enumerate(frames):
        end = {0: 0, count - 1: 1}.get(k % count)
        if not _same_atoms(frame, stored):
            return False
        if end is not None and not _same(frame.positions, ends[end]):
            return False
    return True


def holds_band(path, stored, mark):
    """Whether the file ``path`` holds a band of the restart file's run: its images
    bear the run's ``mark``, or are the band the file holds, or are a band between its
    endpoints of which an image was computed at its place (the band where a run ended)."""
    frames = _structures(path)
    if "band" not in stored or "endpoints" not in stored:
        return False
    band = np.asarray(stored["band"], dtype=float)  # (i - 2, n, 3)
    if len(frames) != len(band) + 2 or not all(_same_atoms(f, stored) for f in frames):
        return False
    if mark is not None and all(frame.info.get(MARK) == mark for frame in frames):
        return True
    positions = np.array([frame.positions for frame in frames])  # (i, n, 3)
    if not _same(positions[[0, -1]], np.asarray(stored["endpoints"], dtype=float)):
        return False
    return _same(positions[1:-1], band) or _an_image_computed(positions, stored)


def holds_mark(path, mark):
    """Whether the file ``path`` (a picture) bears the run's ``mark`` in its metadata."""
    return mark is not None and mark.encode() in Path(path).read_bytes()


def holds_hessian(path, stored):
    """Whether ``path`` holds a model Hessian ``asebo optimize`` wrote on the restart
    file: ASE's vibrations at a configuration it computed (``.json``), or a finite
    symmetric (3N, 3N) array (``.npy``, which keeps no positions)."""
    size = 3 * len(stored["numbers"])
    try:
        if Path(path).suffix == ".npy":
            hessian = np.load(path, allow_pickle=False)
            return (
                hessian.shape == (size, size)
                and bool(np.isfinite(hessian).all())
                and np.allclose(hessian, hessian.T, rtol=1e-6, atol=1e-8)
            )
        from ase.vibrations import VibrationsData

        atoms = VibrationsData.read(str(path)).get_atoms()
    except Exception:  # any reader's error: not a Hessian of the run
        return False
    return _computed(atoms, stored) is not None


def run_mark(restart, stored):
    """The mark of the files a band on the restart file ``restart`` writes: the file's
    resolved name and its first two calls (the endpoints, computed first), hashed; None
    where ``stored`` (its content) holds fewer calls."""
    if stored is None or len(stored["energies"]) < 2:
        return None
    digest = hashlib.sha256(os.fsencode(Path(restart).resolve()))
    digest.update(np.ascontiguousarray(_computed_positions(stored)[:2]).tobytes())
    return f"asebo-neb-{digest.hexdigest()[:16]}"


def _structures(path, index=":"):
    """The frames of the structure file ``path`` at ``index``, read in its
    :func:`asebo.commands._formats.read_format`; none where it cannot be read."""
    import ase.io

    from asebo.commands._formats import read_format

    try:
        found = ase.io.read(path, index=index, format=read_format(path))
    except Exception:  # any reader's error: no structure of the run
        return []
    return found if isinstance(found, list) else [found]


def _trajectory_frames(path):
    """The frames of the ASE trajectory ``path`` that can be read, in order."""
    from ase.io.trajectory import Trajectory

    frames = []
    try:
        with Trajectory(path, "r") as trajectory:
            for k in range(len(trajectory)):
                frames.append(trajectory[k])
    except Exception:  # no trajectory, or one cut short: the frames before
        pass
    return frames


def _computed_positions(stored):
    """The positions of the restart file's calls, (m, n, 3)."""
    return np.reshape(np.asarray(stored["positions"], dtype=float), (-1, len(stored["numbers"]), 3))


def _same_atoms(atoms, stored):
    """Whether ``atoms`` are the restart file's atoms, in its order."""
    return np.array_equal(atoms.numbers, np.asarray(stored["numbers"]))


def _same(a, b):
    """Whether the positions ``a`` and ``b`` are one, within :data:`SAME`."""
    return np.shape(a) == np.shape(b) and bool(np.all(np.abs(a - b) < SAME))


def _computed(atoms, stored):
    """The restart file's call at the positions of ``atoms``, or None."""
    if not _same_atoms(atoms, stored):
        return None
    for index, positions in enumerate(_computed_positions(stored)):
        if _same(atoms.positions, positions):
            return index
    return None


def _an_image_computed(positions, stored):
    """Whether a moving image of the band ``positions`` (i, n, 3) is where the restart
    file computed that image."""
    computed = _computed_positions(stored)
    images = stored.get("images", [])
    return any(
        0 < image < len(positions) - 1 and _same(positions[image], computed[k])
        for k, image in enumerate(images)
    )
