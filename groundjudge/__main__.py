from __future__ import annotations

from groundjudge.cli.root import main

main()
