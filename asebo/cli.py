"""Command line: ``asebo optimize | compare | bench NAME``.

Each command is a module of :mod:`asebo.commands` and each benchmark a module of
:mod:`asebo.benchmarks`; both define ``add_arguments(parser)`` and ``run(args)``.
They are found by name, so adding one needs no change here.
"""

import argparse
import importlib
import pkgutil
import sys

import asebo.benchmarks
import asebo.commands


def _add_module_parsers(subparsers, package):
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                   if not m.name.startswith("_"))
    for name in names:
        module = importlib.import_module(f"{package.__name__}.{name}")
        summary = (module.__doc__ or name).strip().splitlines()[0]
        parser = subparsers.add_parser(name, help=summary, description=module.__doc__,
                                       formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(parser)
        parser.set_defaults(func=module.run)


def build_parser():
    """The argument parser of the ``asebo`` command."""
    parser = argparse.ArgumentParser(prog="asebo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_module_parsers(commands, asebo.commands)
    bench = commands.add_parser("bench", help="run a benchmark and print its table")
    _add_module_parsers(bench.add_subparsers(dest="benchmark", required=True, metavar="NAME"),
                        asebo.benchmarks)
    return parser


def main(argv=None):
    """Entry point of the ``asebo`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    status = args.func(args)
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
