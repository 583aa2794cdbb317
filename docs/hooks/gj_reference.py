"""The manual's reference pages, generated from the code at build time so that they cannot drift.

``mkdocs.yml`` loads this file as a hook: a page that holds a marker such as ``<!-- gj:cli -->`` gets the generated
text in its place. The markers:

- ``<!-- gj:cli -->``: every command of the typer app (walked from ``groundjudge.cli.app``, so a command added to
  the app appears by itself), its usage, its help and every argument and option as ``--help`` prints them.
- ``<!-- gj:config -->``: every field of :class:`groundjudge.config.Config` (type, default, description, the CLI
  option that sets it) and of ``Thresholds``, with the presets.
- ``<!-- gj:report -->``: the report line's fields, from the pydantic models (``AnswerReport`` and what it holds).
- ``<!-- gj:summary -->``: the run summary's fields (``RunSummary``).
- ``<!-- gj:errors -->``: the error tree of ``groundjudge.errors`` (and the run stops of ``groundjudge.runs``).
- ``<!-- gj:exit-codes -->``: the CLI's exit codes, from ``groundjudge.cli.common``.
- ``<!-- gj:messages -->``: every message an error is raised with, read from the package's source.

The tests (``tests/docs``) import the same functions: :func:`cli_commands` is also what they check the manual's
shell examples and option names against.
"""

from __future__ import annotations

import html
import inspect
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = re.compile(r"<!--\s*gj:([a-z-]+)\s*-->")


# ---------------------------------------------------------------------------------------------------------------
# the command line


@dataclass
class CliParam:
    """One argument or option of a command, as ``--help`` shows it."""

    name: str  # the Python parameter's name (for settings: the Config field's)
    kind: str  # "argument" or "option"
    opts: list[str]  # every spelling: --out, -o, --no-resume ...
    names: str  # the names column of --help (with the metavar)
    help: str  # the help column of --help (with [default: ...])
    panel: str | None
    required: bool


@dataclass
class CliCommand:
    """One command of the app (``path`` without the program name, e.g. ``["cache", "stats"]``)."""

    path: list[str]
    help: str
    usage: str
    params: list[CliParam]
    is_group: bool

    @property
    def name(self) -> str:
        return " ".join(["groundjudge", *self.path])

    @property
    def options(self) -> set[str]:
        """Every option spelling this command takes (``--help`` included)."""
        return {o for p in self.params if p.kind == "option" for o in p.opts}


def cli_commands() -> list[CliCommand]:
    """Every command and group of the app, depth first in the order ``--help`` lists them, the root first."""
    import typer

    from groundjudge.cli import app

    root = typer.main.get_command(app)
    out: list[CliCommand] = []

    def walk(cmd: Any, path: list[str], parent: Any) -> None:
        ctx = cmd.context_class(cmd, info_name=path[-1] if path else "groundjudge", parent=parent)
        params = []
        for p in cmd.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is None and p.param_type_name != "argument":  # hidden
                continue
            names, help_text = record if record else (p.name.upper(), "")
            params.append(
                CliParam(
                    name=p.name or "",
                    kind=p.param_type_name,
                    opts=[*p.opts, *getattr(p, "secondary_opts", [])],
                    names=names,
                    help=" ".join((help_text or "").split()),
                    panel=getattr(p, "rich_help_panel", None),
                    required=bool(p.required),
                )
            )
        subcommands = getattr(cmd, "commands", None)
        if hasattr(cmd, "_usage"):
            pieces = cmd._usage()
        else:
            pieces = [re.sub(r"[{}]", "", piece).upper() for piece in cmd.collect_usage_pieces(ctx)]
        usage = " ".join(["groundjudge", *path, *pieces])
        out.append(CliCommand(path, inspect.cleandoc(cmd.help or ""), usage, params, subcommands is not None))
        for name in cmd.list_commands(ctx) if subcommands is not None else []:
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                walk(sub, [*path, name], ctx)

    walk(root, [], None)
    return out


def _anchor(command: CliCommand) -> str:
    return "-".join(["groundjudge", *command.path])


def cli_markdown() -> str:
    """The CLI reference: one section per command."""
    commands = cli_commands()
    lines = ["| command | what it does |", "|---|---|"]
    for c in commands[1:]:
        first = " ".join(c.help.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
        lines.append(f"| [`{c.name}`](#{_anchor(c)}) | {_md_cell(first)} |")
    lines.append("")
    for c in commands:
        lines.append(f"## {c.name} {{#{_anchor(c)}}}")
        lines.append("")
        lines.append(f"```text\n{c.usage}\n```")
        lines.append("")
        for paragraph in c.help.split("\n\n"):
            lines.append(_md_text(" ".join(paragraph.split())))
            lines.append("")
        if c.is_group:
            subs = [s for s in commands if len(s.path) == len(c.path) + 1 and s.path[: len(c.path)] == c.path]
            if subs:
                lines.append("Commands: " + ", ".join(f"[`{s.path[-1]}`](#{_anchor(s)})" for s in subs) + ".")
                lines.append("")
        params = [p for p in c.params if p.opts != ["--help"]]
        if params:
            lines.append(_params_table(params))
            lines.append("")
    return "\n".join(lines)


def _params_table(params: list[CliParam]) -> str:
    rows = []
    panel = object()
    for p in params:
        group = "Arguments" if p.kind == "argument" else (p.panel or "Options")
        if group != panel:
            panel = group
            rows.append(f'<tr><th colspan="2">{html.escape(group)}</th></tr>')
        names = "<br>".join(f"<code>{html.escape(part)}</code>" for part in p.names.split(" / "))
        rows.append(f"<tr><td>{names}</td><td>{html.escape(p.help) or '<em>(no help text)</em>'}</td></tr>")
    return '<table class="gj-params">\n<tr><th>name</th><th>what it does</th></tr>\n' + "\n".join(rows) + "\n</table>"


# ---------------------------------------------------------------------------------------------------------------
# pydantic models: Config, the report line, the run summary


def type_name(annotation: Any) -> str:
    """A readable type: ``str | None``, ``'nli' | 'cascade'``, ``list[Quote]``, ``float (0 < x <= 1)``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        base, *meta = args
        bounds = []
        for m in meta:
            for item in getattr(m, "metadata", [m]):
                for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
                    value = getattr(item, attr, None)
                    if value is not None:
                        bounds.append(f"{sign} {value}")
        return type_name(base) + (f" ({', '.join(bounds)})" if bounds else "")
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        try:
            return repr(field.default_factory())
        except TypeError:
            return "(computed)"
    if field.default is PydanticUndefined:
        return "required"
    return repr(field.default)


def _bounds(field: Any) -> str:
    out = []
    for item in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(item, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return ", ".join(out)


def model_rows(model: type) -> Iterator[tuple[str, str, str, str]]:
    """(name, type, default, description) of every field of a pydantic model, computed fields last."""
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        kind = type_name(field.annotation)
        bounds = _bounds(field)
        if bounds:
            kind += f" ({bounds})"
        yield name, kind, _default(field), field.description or ""
    for name, computed in getattr(model, "model_computed_fields", {}).items():
        doc = computed.description or inspect.getdoc(computed.wrapped_property) or ""
        yield name, type_name(computed.return_type), "(computed)", " ".join(doc.split())


def _model_table(model: type, extra_column: dict[str, str] | None = None) -> str:
    head = "<tr><th>field</th><th>type</th><th>default</th><th>description</th>"
    head += "<th>CLI</th></tr>" if extra_column is not None else "</tr>"
    rows = [head]
    for name, kind, default, description in model_rows(model):
        cells = [
            f'<td><code id="{model.__name__.lower()}-{name}">{name}</code></td>',
            f"<td><code>{html.escape(kind)}</code></td>",
        ]
        cells.append(f"<td><code>{html.escape(default)}</code></td>")
        cells.append(f"<td>{html.escape(description)}</td>")
        if extra_column is not None:
            option = extra_column.get(name, "")
            cells.append(f"<td><code>{html.escape(option)}</code></td>" if option else "<td></td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return '<table class="gj-fields">\n' + "\n".join(rows) + "\n</table>"


def config_markdown() -> str:
    """Every Config field, the CLI option that sets it, Thresholds and the presets."""
    from groundjudge.config import PRESETS, Config, Thresholds

    score = next(c for c in cli_commands() if c.path == ["score"])
    options = {p.name: " / ".join(o for o in p.opts if o.startswith("--")) for p in score.params if p.kind == "option"}
    lines = [
        f"`Config` has {len(Config.model_fields)} fields. The CLI column names the `groundjudge score` option that "
        "sets a field; every field can be set in a JSON config file (`score --config FILE`) or as a keyword of "
        "`Config(...)` / `Evaluator(...)`.",
        "",
        _model_table(Config, options),
        "",
        "### Thresholds",
        "",
        _md_text(inspect.getdoc(Thresholds) or ""),
        "",
        _model_table(Thresholds),
        "",
        "### Presets",
        "",
        "`preset` (`--preset`) picks one of these when the config sets no `thresholds`:",
        "",
        "| preset | min_grounded | warn | max_contradicted |",
        "|---|---|---|---|",
    ]
    for name, t in PRESETS.items():
        lines.append(f"| `{name}` | {t.min_grounded} | {t.warn} | {t.max_contradicted} |")
    return "\n".join(lines)


def report_markdown() -> str:
    """The fields of a report line and of every object it holds."""
    from groundjudge import models

    order = [
        models.AnswerReport,
        models.Scores,
        models.ClaimVerdict,
        models.Claim,
        models.Quote,
        models.ClaimNLI,
        models.Passage,
        models.SecondVerdict,
        models.SecondJudging,
        models.QAResult,
        models.QAItem,
        models.Usage,
        models.SourceInfo,
        models.SourceRef,
        models.ConversationTurn,
    ]
    lines = []
    for model in order:
        lines += [f"### {model.__name__}", "", _md_text(inspect.getdoc(model) or ""), "", _model_table(model), ""]
    return "\n".join(lines)


def summary_markdown() -> str:
    """The run summary's fields (``score``, ``report``, ``--json``, the notebook Run)."""
    from groundjudge.review.summary import RunSummary

    return "\n".join([_md_text(inspect.getdoc(RunSummary) or ""), "", _model_table(RunSummary)])


# ---------------------------------------------------------------------------------------------------------------
# errors and exit codes


def errors_markdown() -> str:
    """The error tree: each class, its parent and its docstring."""
    from groundjudge import errors
    from groundjudge.runs import out as runs_out

    classes = [
        c
        for module in (errors, runs_out)
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, errors.GroundjudgeError) and c.__module__ == module.__name__
    ]
    seen: set[type] = set()
    rows = ["<tr><th>error</th><th>is a</th><th>when</th></tr>"]

    def add(cls: type, depth: int) -> None:
        if cls in seen:
            return
        seen.add(cls)
        parents = ", ".join(b.__name__ for b in cls.__bases__ if b is not Exception)
        doc = " ".join((inspect.getdoc(cls) or "").split()) if cls.__doc__ else ""
        indent = "&nbsp;" * 4 * depth
        rows.append(
            f"<tr><td>{indent}<code>{cls.__module__}.{cls.__name__}</code></td><td>{html.escape(parents)}</td>"
            f"<td>{html.escape(doc)}</td></tr>"
        )
        for sub in sorted((c for c in classes if cls in c.__bases__), key=lambda c: c.__name__):
            add(sub, depth + 1)

    add(errors.GroundjudgeError, 0)
    for cls in classes:  # anything not reached from the root (none today)
        add(cls, 0)
    return '<table class="gj-errors">\n' + "\n".join(rows) + "\n</table>"


def exit_codes_markdown() -> str:
    """The exit codes, read from ``groundjudge.cli.common``."""
    from groundjudge.cli import common

    meaning = {
        "EXIT_OK": "every row scored (or the command did what it was asked)",
        "EXIT_ROWS_FAILED": "some rows failed (bad input or an error: each is in the output with its reason; after "
        "`--resume`, also an earlier run's failed reports still in the output: `--retry-errors` scores them again); "
        "`report`: the file holds a failed row (ERROR, a stage named in `errors`, a score that is no number); "
        "`compare --fail-if-worse`: B is significantly worse than A, or lacks answers of A, or failed on any answer, "
        "or judges FAIL answers A does not vouch for, or checks no claim (NO_CLAIMS) of answers A judged",
        "EXIT_USAGE": "usage or configuration error: a bad option, a missing file, a library error "
        "(`GroundjudgeError`), printed as `error: <message>` on stderr; `compare --fail-if-worse` on runs scored with "
        "other settings (no gate without `--allow-other-settings`), or on runs with no answer scored in both",
        "EXIT_BUDGET": "`--budget` or `--max-calls` reached: finished rows are kept, `--resume` goes on",
        "EXIT_PENDING": "a provider batch is still running: re-run the same command with `--resume` to collect it",
    }
    codes = sorted(
        ((value, name) for name, value in vars(common).items() if name.startswith("EXIT_") and isinstance(value, int)),
    )
    lines = ["| code | constant | meaning |", "|---|---|---|"]
    for value, name in codes:
        lines.append(f"| {value} | `{name}` | {meaning.get(name, '')} |")
    return "\n".join(lines)


def _message(node: Any) -> str | None:
    """The text of a message argument: a string, or an f-string with its fields as ``{name}``."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp):
        left, right = _message(node.left), _message(node.right)
        return None if left is None or right is None else left + right
    return None


def messages_markdown() -> str:
    """Every message a GroundjudgeError (or the command line's ``fail``) is raised with, read from the source."""
    import ast

    from groundjudge import errors

    package = Path(errors.__file__).resolve().parent
    names = {"fail"} | {n for n, c in vars(errors).items() if isinstance(c, type) and issubclass(c, Exception)}
    rows = ["<tr><th>error</th><th>message</th><th>where</th></tr>"]
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name not in names or not node.exc.args:
                continue
            text = _message(node.exc.args[0])
            if not text:
                continue
            where = f"{path.relative_to(package.parent).with_suffix('')}".replace("/", ".")
            shown = "error (exit 2)" if name == "fail" else name
            rows.append(
                f"<tr><td><code>{shown}</code></td><td>{html.escape(' '.join(text.split()))}</td>"
                f"<td><code>{where}</code></td></tr>"
            )
    return '<table class="gj-errors">\n' + "\n".join(rows) + "\n</table>"


# ---------------------------------------------------------------------------------------------------------------
# helpers and the hook


def _md_text(text: str) -> str:
    """Plain text from the code, made safe for Markdown (no accidental emphasis, tags or links)."""
    text = html.escape(text, quote=False)
    return re.sub(r"([*_\[\]`])", r"\\\1", text)


def _md_cell(text: str) -> str:
    return _md_text(text).replace("|", "\\|")


GENERATORS = {
    "cli": cli_markdown,
    "config": config_markdown,
    "report": report_markdown,
    "summary": summary_markdown,
    "errors": errors_markdown,
    "exit-codes": exit_codes_markdown,
    "messages": messages_markdown,
}


def expand(markdown: str) -> str:
    """Replace every ``<!-- gj:NAME -->`` marker with the generated text (an unknown name is an error)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"unknown generated section <!-- gj:{name} --> (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs hook: expand the markers of a page."""
    return expand(markdown) if MARKER.search(markdown) else markdown


SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):(?=<code)")


def on_page_content(html_text: str, **kwargs: Any) -> str:
    """MkDocs hook: the docstrings' Sphinx roles (``:class:`X```) read as plain code names."""
    return SPHINX_ROLE.sub("", html_text)
