"""Benchmarks run by ``asebo bench NAME``: one module each, with ``add_arguments`` and ``run``."""
