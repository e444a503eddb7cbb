"""The ``asebo optimize`` and ``asebo compare`` commands: one module each."""

REFUSED = 2
"""Exit status of input refused before any calculator call: argparse's usage status."""

FAILED = 3
"""Exit status of a run stopped by its calculator or by a file it could not write."""

INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (SIGINT), as a shell reports it."""


class CommandExit(SystemExit):
    """Stops a command with a one-line message and an exit status.

    ``str(exit)`` is the message, which :func:`asebo.cli.main` prints to standard
    error; ``code`` is the status the command exits with.

    Parameters
    ----------
    message : str
        One line: what went wrong and what to do.
    status : int
        :data:`REFUSED` or :data:`FAILED`.
    """

    def __init__(self, message, status):
        super().__init__(message)
        self.code = status
