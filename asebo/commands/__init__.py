"""The ``asebo optimize`` and ``asebo compare`` commands: one module each."""
