"""The class of every command: library errors become exit code 2 here, once, and ``--help`` is laid out to fit.

``--help`` lists the options in panels (``rich_help_panel``), each option's names whole on its first line and its
help beside or below them, wrapped to the terminal's width (COLUMNS; TERMINAL_WIDTH as typer reads it). Help texts
are plain text, never rich markup: a ``[default: ...]`` or ``groundjudge[ray]`` in one is printed as written.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text
from typer.core import TyperCommand

from groundjudge.atomic import is_temporary
from groundjudge.cli.common import fail
from groundjudge.cli.options import as_options
from groundjudge.errors import ConfigError, GroundjudgeError

# what the system says of a path the user gave (no such file or folder, not allowed, a folder where a file goes, a
# file where a folder goes, a read-only or full disk, a name too long): said as 'error: PATH: why', exit 2
PATH_ERRORS = frozenset(
    {
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.EROFS,
        errno.ENOSPC,
        getattr(errno, "EDQUOT", errno.ENOSPC),  # not on every system
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.ENOTEMPTY,
    }
)
NAMES_WIDTH = 26  # option names up to this long share their first line with the help; longer ones have their own


class Command(TyperCommand):
    """A typer command whose errors and help are the command line's own (see the module)."""

    def __init__(self, name: str | None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        if self.short_help is None and self.help:  # the group's list of commands: the first sentence, on one line
            self.short_help = " ".join(self.help.split()).split("; ")[0].split(". ")[0].rstrip(".") + "."

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a :class:`GroundjudgeError` it raises is a message and exit 2 (run stops that have their
        own codes are handled by the command, before they get here), and so is a file the system refused (an OUT in
        a folder that does not exist, one not writable, a folder where a file should be): the path and why, not a
        traceback."""
        try:
            return super().invoke(ctx)
        except GroundjudgeError as exc:
            if isinstance(exc, ConfigError) and exc.settings:  # fields to set: said as this command's options
                raise fail(f"{exc}\nAs options of this command: {as_options(ctx, exc.settings)}") from exc
            raise fail(str(exc)) from exc
        except OSError as exc:
            if exc.filename is None or exc.errno not in PATH_ERRORS:  # a socket's, a device's, too many open files:
                raise  # not what the user's path is; a defect, shown as one
            where = _as_given(exc.filename) + (f" -> {_as_given(exc.filename2)}" if exc.filename2 else "")
            raise fail(f"{where}: {exc.strerror or exc}") from exc

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """Print the help (see the module)."""
        width = os.environ.get("TERMINAL_WIDTH")
        console = Console(width=int(width) if width else None, highlight=False)
        console.print(Text(" Usage: ", style="yellow") + Text(" ".join([ctx.command_path, *self._usage()])))
        for paragraph in (self.help or "").split("\n\n"):  # a docstring's paragraphs, each wrapped, indented by one
            console.print()
            for line in Text(" ".join(paragraph.split())).wrap(console, console.width - 2):
                line.rstrip()
                console.print(Text(" ") + line)
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            default = "Arguments" if param.param_type_name == "argument" else "Options"
            panels.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(record)
        if len(panels.get("Options", [])) == 1 and len(panels) > 2:  # --help alone: with the last panel
            help_option = panels.pop("Options")
            panels[list(panels)[-1]] += help_option
        inner = console.width - 4  # the panel's borders and padding
        for title, records in panels.items():
            console.print(Panel(Group(*_entries(console, records, inner)), title=title, title_align="left"))

    def _usage(self) -> list[str]:
        pieces = []
        for param in self.params:
            if param.param_type_name == "argument":
                pieces.append((param.name or "").upper() + ("..." if param.nargs != 1 else ""))
        return ["[OPTIONS]", *pieces]


def _as_given(filename: object) -> str:
    """A path an OSError names, as the user gave it: the atomic writer's temporary file beside a file to write
    (``NAME.<12 hex digits>.tmp``, a name no one asked for) is named as that file."""
    path = os.fsdecode(filename) if isinstance(filename, (str, bytes, os.PathLike)) else str(filename)
    return path[: -len(".000000000000.tmp")] if is_temporary(os.path.basename(path)) else path


def _entries(console: Console, records: list[tuple[str, str]], inner: int) -> list[Text]:
    """Each option: its names (never cut), then its help wrapped beside them or, for long names, below them."""
    names_width = min(NAMES_WIDTH, max(len(names) for names, _ in records))
    help_width = max(20, inner - names_width - 2)
    lines: list[Text] = []
    for names, help_text in records:
        wrapped: list[Text] = list(Text(" ".join(help_text.split())).wrap(console, help_width)) if help_text else []
        for line in wrapped:
            line.rstrip()
        pad = " " * (names_width + 2)
        if len(names) > names_width:
            lines.append(Text(names, style="bold cyan"))
            lines += [Text(pad) + line for line in wrapped]
            continue
        first = Text(names.ljust(names_width + 2), style="bold cyan")
        lines.append(first + wrapped[0] if wrapped else first)
        lines += [Text(pad) + line for line in wrapped[1:]]
    return lines
