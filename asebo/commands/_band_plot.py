"""The band ``asebo neb`` writes: its images with their energies and forces, and the
picture of its energy profile.

The picture is ASE's (:meth:`ase.mep.NEBTools.plot_band`, drawn by
:func:`ase.utils.forcecurve.fit_images`: each image's energy along the
path, the tangent its force gives, the cubic spline through them) with the GP's mean
energy along the straight segments between the images drawn over it, and the images
whose values are the GP's (not computed at their place) drawn open. Drawn with
matplotlib's Agg backend: no display needed.
"""

import numpy as np
from ase.calculators.singlepoint import SinglePointCalculator

SEGMENT_POINTS = 20
"""Points of the GP's profile on each segment between two images, as NEBTools' spline."""


def band_frames(optimizer):
    """Every image of the band of ``optimizer`` (:class:`asebo.neb.BONEB`) with its
    energy and unconstrained forces: the computed ones where the image was computed at
    its place, the GP's elsewhere (:meth:`asebo.neb.BONEB.band_state`). No call.

    Returns
    -------
    frames : list of ase.Atoms
        Copies of the images, each with a SinglePointCalculator.
    computed : array (i,) of bool
        Which images were computed at their place.
    """
    state = optimizer.band_state()
    energies, forces = state.values  # (i,), (i, n, 3)
    frames = []
    for image, energy, force in zip(optimizer.images, energies, forces):
        frame = image.copy()
        frame.calc = SinglePointCalculator(frame, energy=float(energy), forces=np.array(force))
        frames.append(frame)
    return frames, np.asarray(state.computed, dtype=bool)


def model_profile(optimizer, path, points=SEGMENT_POINTS):
    """The GP's mean energy along the straight segments between consecutive images.

    Parameters
    ----------
    optimizer : asebo.neb.BONEB
        After :meth:`asebo.neb.BONEB.band_state`, whose fit its models keep.
    path : array (i,)
        Å: each image's place along the band (NEBTools' path: the summed distances).
    points : int
        Points on each segment.

    Returns
    -------
    s : array (m,)
        Å, along the band.
    energies : array (m,)
        eV, the GP's mean; each point on the GP of the nearer image.
    """
    positions = optimizer.positions  # (i, n, 3)
    fractions = np.linspace(0.0, 1.0, points, endpoint=False)  # (p,)
    segments = np.arange(len(positions) - 1)  # (i - 1,)
    start, fraction = np.meshgrid(segments, fractions, indexing="ij")  # (i - 1, p) each
    start, fraction = np.append(start.ravel(), segments[-1]), np.append(fraction.ravel(), 1.0)
    weight = fraction[:, None, None]  # (m, 1, 1)
    where = (1 - weight) * positions[start] + weight * positions[start + 1]  # (m, n, 3)
    nearer = start + (fraction >= 0.5)  # (m,)
    energies = optimizer.models.predict(where, nearer)  # (m,)
    s = path[start] + fraction * (path[start + 1] - path[start])
    return s, np.asarray(energies, dtype=float).ravel()


def write_band_plot(path, optimizer, frames, computed, mark=None):
    """Write the picture of the band (module docstring) to ``path`` (PNG, PDF or SVG by
    its suffix), with ``mark`` (:func:`asebo.commands._kept_files.run_mark`), where
    given, as its metadata's keywords."""
    from ase.utils.forcecurve import fit_images
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    fit = fit_images(frames)
    fit.plot(ax=axes)  # ase.mep.NEBTools.plot_band's picture
    first = frames[0].get_potential_energy()
    s, energies = model_profile(optimizer, np.asarray(fit.path))
    axes.plot(s, energies - first, "--", color="C1", label="GP mean between images")
    axes.plot([], [], "o", color="C0", label="image computed")
    if not computed.all():
        model_only = ~computed
        along, energy = np.asarray(fit.path), np.asarray(fit.energies)
        axes.plot(
            along[model_only],
            energy[model_only],
            "o",
            mfc="white",
            color="C0",
            label="image valued by the GP",
        )
    axes.plot([], [], "g-", label="slope of its force")
    axes.plot([], [], "k-", label="spline through the images")
    axes.legend(fontsize="small")
    figure.savefig(path, dpi=120, metadata=None if mark is None else {"Keywords": mark})
