"""The command line: parses options, composes library calls, maps errors to exit codes.

Only this package imports typer or rich, and nothing in groundjudge imports it (the console script and
``python -m groundjudge`` do). ``root`` holds the Typer app and registers every command; ``command`` the class of
every command (a library error -> exit 2, once; ``--help`` in panels that fit the terminal); ``options`` every option
declared once (settings named after their ``Config`` field, the aliases several commands share); ``common`` what every
command prints with (exit codes, ``--json``, tables a pipe never wraps); ``notes`` what the command line says of its
own accord (the local model an nli-mode run trusts) and the third-party output it keeps quiet unless ``-v``.
"""

from __future__ import annotations

from groundjudge.cli.root import app, main

__all__ = ["app", "main"]
