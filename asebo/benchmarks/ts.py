"""Saddle points from the transition-state guesses of Baker and Chan, BOSaddle and Sella.

The 25 guesses of J. Baker and F. Chan (J. Comput. Chem. 17, 888 (1996)), 3 to 16
atoms (``asebo/data/baker_ts``: ``16_h2po4_anion`` has charge -1,
``20_hconh3_cation`` +1, an odd electron count a doublet), with GFN2-xTB to
``--fmax``: :class:`asebo.saddle.BOSaddle` and Sella (``internal=True, order=1``,
E. D. Hermes et al., J. Chem. Theory Comput. 18, 6974 (2022)) side by side in one run.
Prints one row per guess: each optimizer's force calls (``*`` not converged), and
at each endpoint the imaginary modes of the finite-difference Hessian
(:func:`asebo.benchmarks._endpoint_audit.imaginary_modes`, above 50 cm⁻¹, its calls
not counted), the overlap of the endpoint's lowest mode with the guess's lowest mode
(both of the finite-difference Hessians, mass-weighted, the rigid motions left out,
the endpoint turned onto the guess: :func:`asebo.benchmarks._endpoint_audit.mode_overlap`)
and the energy above the lower of the two endpoints (meV); then the calls in all, the
runs ending at a first-order saddle point, those of them on the guess's mode (overlap
:data:`ON_MODE` or more: a first-order saddle point of another motion is a miss), and
those where both end at one with energies within 10 meV (the same saddle). A run that
raises is a row that says so. ``--optimizers`` runs one of the two only.

``--set reactions`` takes instead the approximate transition state of each reaction of
Birkholz and Schlegel's path test set (from A. B. Birkholz and H. B. Schlegel's work on
reaction-path optimization, as the pysisyphus geometry library collects it;
``asebo/data/reactions``, the middle frame of each file;
``18_sn2`` has charge -1, ``15_oxirane`` an odd electron count, a doublet): guesses none
of BOSaddle's choices were made on. ``--set interpolated`` takes the midpoint of each
of those reactions' first and last frames by the image-dependent pair potential
(:func:`interpolated_midpoint`): rougher guesses, built for a measurement, not tuned on.

BOSaddle's default prior (``auto``) is GFN2-xTB under any calculator but tblite and
GFN1-xTB under tblite's GFN2-xTB (the GP learns the difference; the prior's calls are
not counted, their time is outside the calculator's). ``--prior`` gives it another: a
calculator preset (``gfn2``, say) or a model prior's name (``lindh``, the Lindh
model, reversed along the bonds the guess makes and breaks; ``max``).

``--calculator`` runs every search and Hessian with another calculator preset
(``gpaw:mode=lcao,basis=dzp,h=0.2,vacuum=4``, say; a guess of odd electron count
needs a spin-polarized one).
"""

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from ase.io import read

from asebo.benchmarks._charges import with_charge
from asebo.benchmarks._options import positive_float, positive_int, refuse_unknown

DATA = Path(__file__).resolve().parent.parent / "data"
SETS = {
    "baker_ts": DATA / "baker_ts",
    "reactions": DATA / "reactions",
    "interpolated": DATA / "reactions",
}
OPTIMIZERS = ("BOSaddle", "Sella")
SAME = 0.01  # eV: two first-order endpoints this close are the same saddle point
ON_MODE = 0.5  # the overlap of an endpoint's imaginary mode with the guess's lowest mode


def add_arguments(parser):
    parser.add_argument(
        "--set",
        choices=sorted(SETS),
        default="baker_ts",
        help="the 25 guesses of Baker and Chan (default), the approximate transition "
        "states of the reactions of Birkholz and Schlegel, or the IDPP midpoints of "
        "their reactants and products (interpolated)",
    )
    parser.add_argument(
        "--guesses", nargs="+", default=None, help="file stems or substrings (default: all)"
    )
    parser.add_argument("--fmax", type=positive_float, default=0.05, help="eV/Å")
    parser.add_argument("--steps", type=positive_int, default=1000)
    parser.add_argument("--jobs", type=positive_int, default=1)
    parser.add_argument("--no-hessian", action="store_true", help="skip the endpoint's modes")
    parser.add_argument(
        "--prior",
        default=None,
        help="BOSaddle's prior: a calculator preset (gfn1, say; its calls are not "
        "counted) or a model prior ('auto', 'lindh'); default: BOSaddle's own",
    )
    parser.add_argument(
        "--optimizers",
        nargs="+",
        choices=OPTIMIZERS,
        default=list(OPTIMIZERS),
        help="run some of BOSaddle and Sella only (default: both)",
    )
    parser.add_argument(
        "--calculator",
        default="gfn2",
        help="the calculator preset of the searches ('gpaw:mode=lcao,basis=dzp', say); "
        "default: gfn2",
    )


def guesses(wanted=None, folder="baker_ts"):
    """The guesses' names (file stems) in set ``folder`` (a key of :data:`SETS`), those
    matching ``wanted`` (all: None)."""
    names = sorted(path.stem for path in SETS[folder].glob("*.xyz"))
    if wanted:
        names = [name for name in names if any(w in name for w in wanted)]
    return names


def guess(name, folder="baker_ts"):
    """The atoms of guess ``name`` of set ``folder`` (a key of :data:`SETS`; of a
    reaction, the middle of its three frames, or for ``'interpolated'`` the midpoint of
    its first and last by :func:`interpolated_midpoint`), with its charge and spin as
    tblite reads them."""
    frames = read(SETS[folder] / f"{name}.xyz", index=":")
    if folder == "interpolated":
        return with_charge(interpolated_midpoint(frames[0], frames[-1]), name)
    return with_charge(frames[len(frames) // 2], name)


def interpolated_midpoint(initial, final):
    """The image halfway from ``initial`` to ``final`` by the image-dependent pair
    potential (S. Smidstrup, A. Pedersen, K. Stokbro and H. Jónsson, J. Chem. Phys.
    140, 214106 (2014); :meth:`ase.mep.NEB.interpolate` with ``method='idpp'``), after
    ``final`` is laid onto ``initial`` by the rotation and translation that fit it best
    (:func:`ase.build.minimize_rotation_and_translation`)."""
    from ase.build import minimize_rotation_and_translation
    from ase.mep import NEB

    final = final.copy()
    minimize_rotation_and_translation(initial, final)
    images = [initial.copy(), initial.copy(), final]
    NEB(images, method="improvedtangent").interpolate(method="idpp")
    return images[1]


def search(task):
    """Run one optimizer from one guess: a dict of the result."""
    name, folder, optimizer, fmax, steps, skip_modes, prior, preset = task
    from asebo.benchmarks._endpoint_audit import (
        finite_difference_hessian,
        imaginary_modes,
        lowest_mode,
        mode_overlap,
    )
    from asebo.model.priors import resolve_prior
    from calculators import CountingCalculator, get_calculator

    atoms = guess(name, folder)
    start = atoms.copy()
    start_mode = None
    if not skip_modes:
        start_mode = lowest_mode(finite_difference_hessian(start, get_calculator(preset)), start)
    counter = CountingCalculator(get_calculator(preset))
    atoms.calc = counter
    began = time.perf_counter()
    try:
        if optimizer == "BOSaddle":
            from asebo.saddle import BOSaddle

            model = resolve_prior(prior)
            converged = BOSaddle(atoms, logfile=None, prior=model).run(fmax=fmax, steps=steps)
        else:
            from sella import Sella

            walk = Sella(atoms, internal=True, order=1, logfile=None)
            converged = walk.run(fmax=fmax, steps=steps)
        energy = atoms.get_potential_energy()
    except Exception as error:  # an SCF that fails: a row that says so
        return {"calls": counter.ncalls, "error": f"{type(error).__name__}: {str(error)[:80]}"}
    seconds = time.perf_counter() - began - counter.wall_time
    modes = overlap = None
    if not skip_modes:
        hessian = finite_difference_hessian(atoms, get_calculator(preset))
        modes = imaginary_modes(atoms, None, hessian)
        overlap = mode_overlap(start, start_mode, atoms, lowest_mode(hessian, atoms))
    return {
        "calls": counter.ncalls,
        "converged": bool(converged),
        "energy": float(energy),
        "modes": modes,
        "overlap": overlap,
        "seconds": seconds,
    }


def _first_order(result):
    return "error" not in result and result["modes"] is not None and len(result["modes"]) == 1


def _on_the_guess_mode(result):
    """A first-order endpoint whose imaginary mode overlaps the guess's lowest mode by
    :data:`ON_MODE` or more."""
    return _first_order(result) and result["overlap"] >= ON_MODE


def _cell(result, lowest):
    if "error" in result:
        return f"{result['calls']}, {result['error']}"
    star = "" if result["converged"] else "*"
    if result["modes"] is None:
        modes, overlap = "not computed", "-"
    else:
        modes = ", ".join(f"{m:.0f}i" for m in result["modes"]) or "-"
        overlap = f"{result['overlap']:.2f}"
    above = 1000 * (result["energy"] - lowest)
    return f"{result['calls']}{star} | {modes} | {overlap} | {above:.1f}"


def run(args):
    from asebo.model.priors import resolve_prior
    from calculators import get_calculator

    refuse_unknown(  # before any search
        "asebo bench ts",
        [("--prior", resolve_prior, args.prior), ("--calculator", get_calculator, args.calculator)],
    )
    names = guesses(args.guesses, args.set)
    if not names:
        raise SystemExit(
            f"asebo bench ts: no guess of --set {args.set} matches {' '.join(args.guesses)}; "
            f"its guesses: {' '.join(guesses(None, args.set))}"
        )
    optimizers = [o for o in OPTIMIZERS if o in args.optimizers]
    tasks = [
        (n, args.set, o, args.fmax, args.steps, args.no_hessian, args.prior, args.calculator)
        for n in names
        for o in optimizers
    ]
    results = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for task, result in zip(tasks, pool.map(search, tasks)):
            results[task[0], task[2]] = result
            print(f"{task[0]} {task[2]}: {_cell(result, result.get('energy', 0.0))}", flush=True)
    print()
    header = " | ".join(
        f"{o} calls | {o} imaginary (cm⁻¹) | {o} overlap | {o} above (meV)" for o in optimizers
    )
    print(f"| guess | {header} |")
    print("|---|" + "---|---|---|---|" * len(optimizers))
    same = 0
    for name in names:
        row = [results[(name, o)] for o in optimizers]
        energies = [r["energy"] for r in row if "error" not in r]
        lowest = min(energies, default=0.0)
        print(f"| {name} | " + " | ".join(_cell(r, lowest) for r in row) + " |")
        if all(_first_order(r) for r in row) and max(energies) - min(energies) < SAME:
            same += 1
    print()
    for optimizer in optimizers:
        done = [results[(n, optimizer)] for n in names]
        calls = sum(r["calls"] for r in done)
        converged = sum(r.get("converged", False) for r in done)
        checked = all("error" in r or r["modes"] is not None for r in done)
        first = sum(_first_order(r) for r in done)
        on_mode = sum(_on_the_guess_mode(r) for r in done)
        orders = (
            f"{first} at a first-order saddle point, {on_mode} of them on the guess's mode "
            f"(overlap {ON_MODE} or more)"
            if checked
            else "orders not computed"
        )
        seconds = [r["seconds"] / max(r["calls"], 1) for r in done if "seconds" in r]
        print(
            f"{optimizer}: {calls} calls in all, {converged} of {len(names)} converged, "
            f"{orders}, {np.mean(seconds) if seconds else float('nan'):.2f} s per call "
            "outside the calculator"
        )
    if len(optimizers) == len(OPTIMIZERS) and not args.no_hessian:
        print(f"both at the same first-order saddle point (within {SAME * 1000:.0f} meV): {same}")
