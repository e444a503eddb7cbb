"""Command line: ``asebo optimize | compare | bench NAME``.

Each command is a module of :mod:`asebo.commands` and each benchmark a module of
:mod:`asebo.benchmarks`; both define ``add_arguments(parser)`` and ``run(args)``.
They are found by name, so adding one needs no change here, and only the module
asked for is imported.
"""

import argparse
import copy
import importlib
import pkgutil
import sys

import asebo.benchmarks
import asebo.commands


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the module docstring's layout and shows every option's default value."""

    @staticmethod
    def _shows_default(action):
        return (
            bool(action.option_strings)
            and "default" not in (action.help or "").lower()
            and not any(action.default is value for value in (None, False, argparse.SUPPRESS))
        )

    def _format_action(self, action):
        if self._shows_default(action):
            action = copy.copy(action)
            action.help = f"{action.help or ''} (default: %(default)s)".strip()
        return super()._format_action(action)


def _module_names(package):
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
    )


def _add_module_parsers(subparsers, package, selected):
    for name in _module_names(package):
        if name != selected:
            subparsers.add_parser(name, help=f"'{name} --help' for its options")
            continue
        try:
            module = importlib.import_module(f"{package.__name__}.{name}")
        except ImportError as error:  # an extra that is not installed
            raise SystemExit(f"asebo: {name}: {error}") from error
        summary = (module.__doc__ or name).strip().splitlines()[0]
        parser = subparsers.add_parser(
            name, help=summary, description=module.__doc__, formatter_class=_HelpFormatter
        )
        module.add_arguments(parser)
        parser.set_defaults(func=module.run)


def build_parser(argv=()):
    """The argument parser of the ``asebo`` command, complete for the command in ``argv``."""
    argv = list(argv)
    command = argv[0] if argv else None
    benchmark = argv[1] if command == "bench" and len(argv) > 1 else None
    parser = argparse.ArgumentParser(prog="asebo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_module_parsers(commands, asebo.commands, command)
    bench = commands.add_parser("bench", help="run a benchmark and print its table")
    _add_module_parsers(
        bench.add_subparsers(dest="benchmark", required=True, metavar="NAME"),
        asebo.benchmarks,
        benchmark,
    )
    return parser


def main(argv=None):
    """Entry point of the ``asebo`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    status = args.func(args)
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
