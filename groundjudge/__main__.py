from __future__ import annotations

from groundjudge.cli import main

main()
