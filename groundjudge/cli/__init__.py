"""The command line: parses options, composes library calls, maps errors to exit codes.

Only this package imports typer or rich, and nothing in groundjudge imports it (the console script and
``python -m groundjudge`` do). ``root`` holds the Typer app and registers every command.
"""

from __future__ import annotations

from groundjudge.cli.root import app, main

__all__ = ["app", "main"]
