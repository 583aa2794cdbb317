"""Options declared once: the aliases several commands share, and the options that are :class:`Config` fields.

A command parameter named after a ``Config`` field *is* that setting: :func:`setting` takes its help (the field's
description) and its default from the field, and :func:`config_from_options` reads every such parameter the user gave
back into a ``Config`` in one loop; there is no table from option names to fields. Help texts are never rich markup
(the commands print them as plain text, :mod:`groundjudge.cli.command`), so a ``[`` in one is kept as written.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from pydantic_core import PydanticUndefined

from groundjudge.atomic import same_file
from groundjudge.cli.common import fail
from groundjudge.config import DEVICE, Config, problems
from groundjudge.errors import ArgumentError, ConfigError

# the help panels of 'score' (and of the commands that share its options), in the order --help lists them
INPUT_OUTPUT = "Input and output"
LLM = "LLM judges"
LOCAL = "Local checker"
COST = "Cost and pace"
RUN = "Run"

# parameters named after a Config field that are not that setting: score's --batch-size is rows per batch
NOT_SETTINGS = frozenset({"batch_size"})


def describe(field: str, extra: str = "") -> str:
    """The help of the option for ``Config`` field ``field``: the field's description as a sentence, then ``extra``."""
    text = Config.model_fields[field].description or ""
    text = text[:1].upper() + text[1:]
    if extra:
        text = f"{text}; {extra}"
    return text if text.endswith((".", "]")) or not text else text + "."


def default(field: str) -> Any:
    """The default of ``Config`` field ``field`` (None where it has a factory)."""
    value = Config.model_fields[field].default
    return None if value is PydanticUndefined else value


def setting(field: str, *flags: str, extra: str = "", panel: str | None = None, **kwargs: Any) -> Any:
    """``typer.Option`` for the parameter of ``Config`` field ``field``: its help from the field's description."""
    return typer.Option(*flags, help=describe(field, extra), rich_help_panel=panel, **kwargs)


def given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (or in the environment), not left at its default."""
    source = ctx.get_parameter_source(name)  # by name: typer may bring its own copy of click's enum
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def config_from_options(ctx: typer.Context, path: Path | None = None, **fixed: Any) -> Config:
    """The ``Config`` of a command: the file at ``path`` (if any), then every parameter named after a field that the
    user gave (a default never overwrites a file's value), then ``fixed``. A bad value names its option."""
    overrides = {
        name: str(value) if isinstance(value, Path) else value
        for name, value in ctx.params.items()
        if name in Config.model_fields and name not in NOT_SETTINGS and value is not None and given(ctx, name)
    }
    overrides.update(fixed)
    try:
        return Config.load(path, **overrides) if path else Config.make(**overrides)
    except ConfigError as exc:
        if not isinstance(exc.__cause__, ValidationError):
            raise
        flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if p.name in overrides}
        said = [_sourced(field, message, flags, path) for field, message in problems(exc.__cause__)]
        raise ConfigError("; ".join(said)) from exc


_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _sourced(field: str, message: str, flags: dict[str, str], path: Path | None) -> str:
    """One problem of a refused config, saying where its settings came from: a field the command line gave by its
    option (``flags``: the fields given here), else by its name; a rule across fields (whose message names them)
    with the options given here among them. The config file is named only where a setting it names was not given
    here (from the file, or a default beside it)."""
    named = [field.split(".", 1)[0]] if field else list(dict.fromkeys(_NAME.findall(message)))
    named = [name for name in named if name in Config.model_fields]
    here = [flags[name] for name in named if name in flags]
    where = [f"given here: {', '.join(here)}"] if here and not field else []
    if path is not None and (not named or len(here) < len(named)):
        where.append(f"with the config file {path}")
    said = f"{flags.get(field, field)}: {message}" if field else message
    return said + (f" ({'; '.join(where)})" if where else "")


def as_options(ctx: typer.Context, settings: dict[str, str | None]) -> str:
    """``Config`` fields with the values to give them (a :class:`ConfigError`'s ``settings``) as this command's
    options, read from its parameters named after the fields (:func:`setting`): ``--flag VALUE``, the flag or its
    ``--no-`` form for a switch, ``leave out --flag`` for a value to leave unset (``(none)``), the option alone
    where the value is not known here (None); a field the command has no option for, as a config file's field."""
    params: dict[str | None, Any] = {p.name: p for p in ctx.command.params if p.param_type_name == "option"}
    said = []
    for field, value in settings.items():
        param = params.get(field)
        if param is None or field in NOT_SETTINGS:
            shown = "" if value is None else " unset" if value == "(none)" else f" = {value}"
            said.append(f"{field}{shown} in a --config file")
            continue
        flag = max(param.opts, key=len)
        if value is None:
            said.append(f"{flag} as OUT's run gave it")
        elif param.is_flag and value in ("true", "false"):
            on = value == "true"
            said.append(flag if on else param.secondary_opts[0] if param.secondary_opts else f"leave out {flag}")
        elif value == "(none)":
            said.append(f"leave out {flag}")
        else:
            said.append(f"{flag} {value}")
    return ", ".join(said)


def parse_price(text: str) -> dict[str, float]:
    """``--price IN,OUT`` (USD per million input and output tokens) as ``Config.price``; the config checks >= 0."""
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ArgumentError(text)
        return {"input_per_mtok": float(parts[0]), "output_per_mtok": float(parts[1])}
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: two numbers IN,OUT, USD per million input and output tokens (e.g. 0.5,1.5)"
        ) from None


def _flag(param: typer.CallbackParam) -> str:
    return max(param.opts, key=len) if param.opts else str(param.name)


def file_to_write(ctx: typer.Context, param: typer.CallbackParam, value: Path | None) -> Path | None:
    """The callback of an option that names a file to write: its folder must exist and the name must not be a
    folder, checked before any work (a missing folder surfaced as a traceback after the run had scored). Said as
    the command line's other errors are, on one line, never cut inside the path."""
    if value is None or ctx.resilient_parsing:
        return value
    if value.is_dir():
        raise fail(f"{_flag(param)} {value}: that is a folder; name a file to write")
    if not value.parent.is_dir():
        raise fail(f"{_flag(param)} {value}: there is no folder {value.parent} (create it first)")
    return value


def not_an_input(flag: str, out: Path | None, *inputs: Path | None) -> None:
    """Refuse, before any work, a file to write that is one of the command's inputs, by any path or link to it: it
    would be replaced by what is made from it ('calibrate scored.jsonl -o scored.jsonl' replaced a scored run with a
    config)."""
    if out is None:
        return
    for given in inputs:
        if given is not None and same_file(out, given):
            raise fail(f"{flag} {out}: that is the input {given}; writing it would replace what it is made from")


def device_problem(device: str) -> str | None:
    """Why the local model cannot run on ``device`` on this machine (None: it can): a name torch does not take, or a
    GPU this machine lacks (torch raised mid-command, a traceback and exit 1, after the rows were read)."""
    import torch

    if not DEVICE.fullmatch(device):
        return "must be cpu, mps, cuda or cuda:N (a GPU's index)"
    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            return "this machine has no CUDA device (torch.cuda.is_available() is false); use cpu"
        if int(device.partition(":")[2] or 0) >= count:
            return f"this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
    mps = getattr(torch.backends, "mps", None)
    if device == "mps" and not (mps is not None and mps.is_available()):
        return "this machine has no MPS device (torch.backends.mps.is_available() is false); use cpu"
    return None


def checked_device(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """The callback of a ``--device`` option: a device this machine has, checked before any work."""
    if value is None or ctx.resilient_parsing:
        return value
    why = device_problem(value)
    if why:
        raise fail(f"{_flag(param)} {value}: {why}")
    return value


def number_option(help_text: str, *, least: float, open_least: bool = False) -> Any:
    """A float option that must be a finite number at least ``least`` (above it with ``open_least``), checked before
    any work: click's ranges let NaN through, and tune took a negative --lr (a traceback after the base model
    had scored every held-out claim), --distill or --l2sp."""
    bound = f"above {least:g}" if open_least else f"{least:g} or more"

    def check(ctx: typer.Context, param: typer.CallbackParam, value: float) -> float:
        if ctx.resilient_parsing:
            return value
        if not math.isfinite(value) or value < least or (open_least and value == least):
            raise fail(f"{_flag(param)} {value}: a number {bound}")
        return value

    return typer.Option(help=f"{help_text} A number {bound}.", callback=check)


def _checked_target(ctx: typer.Context, param: typer.CallbackParam, value: float) -> float:
    """``--target``'s callback: the library's rule (learn.calibrate.check_targets), named as the option."""
    from groundjudge.learn.calibrate import check_targets

    if ctx.resilient_parsing:
        return value
    try:
        check_targets(value)
    except ArgumentError:
        raise fail(f"{_flag(param)} {value}: a precision in (0, 1], e.g. 0.9") from None
    return value


def target_option(help_text: str) -> Any:
    """``--target``: the precision local verdicts must reach (calibrate, tune), checked before anything runs."""
    return typer.Option(help=f"{help_text} In (0, 1].", callback=_checked_target)


def cache_dir_option(panel: str | None = None) -> Any:
    """``--cache-dir``, its help from ``Config.cache_dir``."""
    return setting("cache_dir", "--cache-dir", panel=panel, show_default=False)


def json_option(panel: str | None = None) -> Any:
    """``--json``: one JSON object on stdout."""
    return typer.Option(
        "--json",
        help="Print one JSON object on stdout and nothing else (the Python API's keys); the tables go to stderr.",
        rich_help_panel=panel,
    )


def nli_model_option(panel: str | None = None) -> Any:
    """``--nli-model``, its help from ``Config.nli_model``."""
    return setting("nli_model", "--nli-model", panel=panel)


def progress_option(panel: str | None = None) -> Any:
    """``--progress/--no-progress``."""
    return typer.Option("--progress/--no-progress", help="Show a progress bar.", rich_help_panel=panel)


def overwrite_option(panel: str | None = None) -> Any:
    """``--overwrite``: replace OUT."""
    return typer.Option(help="Replace OUT if it holds an earlier run.", rich_help_panel=panel)


# the aliases, for a command with no panels; 'score' puts the same options in its panels (the functions above)
CacheDir = Annotated[Path | None, cache_dir_option()]
JsonOutput = Annotated[bool, json_option()]
NliModel = Annotated[str | None, nli_model_option()]
ShowProgress = Annotated[bool, progress_option()]
Overwrite = Annotated[bool, overwrite_option()]
Scored = Annotated[Path, typer.Argument(help="Output of 'groundjudge score'.", show_default=False)]
