"""Command line: ``asebo optimize | compare | bench NAME``.

Each command is a module of :mod:`asebo.commands` and each benchmark a module of
:mod:`asebo.benchmarks`; both define ``add_arguments(parser)`` and ``run(args)``.
They are found by name, so adding one needs no change here. Only the module asked
for is imported, and a module imports its heavy packages (PyTorch, the optimizer,
scikit-learn, Dask) in ``run``, so that ``--help`` answers at once; the one-line
summaries of the others are read from their source files without importing them.
Help is plain text: the docstrings' reST markup is taken out.
"""

import argparse
import ast
import copy
import importlib
import importlib.util
import pkgutil
import re
import sys

import asebo.benchmarks
import asebo.commands
from asebo.commands import INTERRUPTED, CommandExit

DESCRIPTION = (
    "Bayesian optimization of molecular geometries for ASE: relax a molecule with "
    "BOOptimizer, compare optimizers, run the benchmarks."
)
EPILOG = (
    "'asebo COMMAND --help' shows the options of a command; 'asebo bench --help' lists the "
    "benchmarks."
)

_ROLE = re.compile(r":\w+:`(~?)([^`<]*?)\s*(?:<[^`]*>)?`")  # :class:`~a.b.C`, :ref:`text <x>`
_LITERAL = re.compile(r"``(.+?)``")
_INTERPRETED = re.compile(r"`([^`]+)`")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}([^\s*](?:[^*]*[^\s*])?)\*{1,2}(?![\w*])")


def plain_text(text):
    """``text`` without its reST inline markup: roles, literals, emphasis.

    ``:class:`~a.b.C``` becomes ``C``, ``:mod:`a.b``` becomes ``a.b``, a literal or an
    emphasised word keeps only its text; bullets (``* item``) and layout are kept.
    """

    def role(match):
        tilde, target = match.groups()
        return target.rsplit(".", 1)[-1] if tilde else target

    text = _ROLE.sub(role, text)
    text = _LITERAL.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    return _EMPHASIS.sub(r"\1", text)


def summary(docstring, fallback):
    """The first line of ``docstring`` as plain text, or ``fallback`` without one."""
    lines = (docstring or "").strip().splitlines()
    return plain_text(lines[0].strip()) if lines else fallback


def _source_docstring(module_name):
    """The docstring of a module, read from its source file without importing it."""
    origin = importlib.util.find_spec(module_name).origin
    with open(origin, encoding="utf-8") as handle:
        return ast.get_docstring(ast.parse(handle.read(), origin))


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


class _ListFormatter(argparse.HelpFormatter):
    """A list of commands, each name on the line of its summary.

    argparse measures the names of subcommands without their extra indentation, so
    that the longest name would be put on a line of its own: the column is widened.
    """

    def add_argument(self, action):
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            names = [len(name) for name in action.choices]
            self._action_max_length = max(
                self._action_max_length, max(names, default=0) + self._current_indent + 2
            )


def _module_names(package):
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
    )


def _add_module_parsers(subparsers, package, selected):
    for name in _module_names(package):
        module_name = f"{package.__name__}.{name}"
        if name != selected:
            subparsers.add_parser(name, help=summary(_source_docstring(module_name), name))
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:  # an extra that is not installed
            raise SystemExit(f"asebo: {name}: {error}") from error
        parser = subparsers.add_parser(
            name,
            help=summary(module.__doc__, name),
            description=plain_text(module.__doc__ or name),
            formatter_class=_HelpFormatter,
        )
        module.add_arguments(parser)
        parser.set_defaults(func=module.run)


class _Version(argparse.Action):
    """``--version``: the installed package's version (:mod:`importlib.metadata`), read
    only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import version

        print(f"asebo {version('asebo')}")
        parser.exit()


def build_parser(argv=()):
    """The argument parser of the ``asebo`` command, complete for the command in ``argv``."""
    argv = list(argv)
    command = argv[0] if argv else None
    benchmark = argv[1] if command == "bench" and len(argv) > 1 else None
    parser = argparse.ArgumentParser(
        prog="asebo", description=DESCRIPTION, epilog=EPILOG, formatter_class=_ListFormatter
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    commands = parser.add_subparsers(
        dest="command", required=True, title="commands", metavar="COMMAND"
    )
    _add_module_parsers(commands, asebo.commands, command)
    bench = commands.add_parser(
        "bench",
        help="Run a benchmark and print its table.",
        description="Run a benchmark and print its table. 'asebo bench NAME --help' shows "
        "what NAME measures and its options.",
        formatter_class=_ListFormatter,
    )
    _add_module_parsers(
        bench.add_subparsers(dest="benchmark", required=True, title="benchmarks", metavar="NAME"),
        asebo.benchmarks,
        benchmark,
    )
    return parser


def main(argv=None):
    """Entry point of the ``asebo`` command; returns the exit status.

    A command stopped by :class:`asebo.commands.CommandExit` has its one line printed
    to standard error, and the exception goes on with its status. Ctrl-C prints one
    line (the command's own, where it gives one) and returns
    :data:`asebo.commands.INTERRUPTED`, without a traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _run_command(argv)
    except CommandExit as stop:
        print(stop, file=sys.stderr)
        raise
    except KeyboardInterrupt as interrupt:
        print(str(interrupt) or "asebo: interrupted", file=sys.stderr)
        return INTERRUPTED


def _run_command(argv):
    """Parse ``argv`` and run its command; returns the exit status."""
    args = build_parser(argv).parse_args(argv)
    try:
        status = args.func(args)
    except ImportError as error:  # an extra that is not installed, imported by run
        raise SystemExit(f"asebo: {error}") from error
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
