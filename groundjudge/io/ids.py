"""The one rule for ids, a row's and a context's, whatever format the row came in (``id_text``): the report id
(``io.rows.row_id``), a context object's id (``io.rows.context_objects``) and a conversation turn's id
(``io.conversations.each_turn``) all read an id through it.

Imports only ``errors``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from groundjudge.errors import InputError

EXACT_FLOAT = 2**53  # a float at or beyond this may not hold the integer it was made from


def id_text(value: Any) -> str | None:
    """The one rule for ids (a row's, a context's) in every format: a string without the spaces around it (" 1" from
    "id, answer" in a CSV is "1"); an integer in digits; a float that holds an integer exactly in that integer's
    digits (pandas makes an integer column with a gap into floats: 1 becomes 1.0, which must still match the 1 of an
    earlier run's reports, labels and reviews; a Parquet decimal likewise); None for no id: None, and NaN, pandas'
    missing value (the same table written to CSV has an empty cell there, to Parquet a null: every format numbers
    such a row ``row-N``); any other value (a UUID, a date) as its ``str``.

    Raises:
        InputError: ``value`` cannot be an id, saying why (the caller names the row and field): infinity, a number
            with a fraction, a float too large to hold its integer exactly,
            true/false, a list or an object.
    """
    if value is None or isinstance(value, str):
        return value if value is None else value.strip()
    if isinstance(value, (bool, dict, list)):
        kind = "true/false" if isinstance(value, bool) else f"a {type(value).__name__}"
        raise InputError(f"must be a string or a number, not {kind}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            raise InputError(f"is {value}, a number that is not an integer: give ids as strings or integers")
        return str(int(value))
    if not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return None  # pandas' missing value: no id, as an empty CSV cell or a Parquet null of the same table
    if not math.isfinite(value) or not value.is_integer():
        raise InputError(f"is {value!r}, a number that is not an integer: give ids as strings or integers")
    if abs(value) >= EXACT_FLOAT:
        raise InputError(
            f"is {value!r}, a float too large to hold an integer exactly (digits may have been lost): give ids as "
            "strings or integers"
        )
    return str(int(value))


def earlier_id_text(value: Any) -> str | None:
    """An id as groundjudge before 2026-11-29 wrote it in reports (before :func:`id_text`): the ``str`` of any value
    but None (NaN was None too), a list or an object, spaces kept (``" r1"``, ``1.0`` as ``"1.0"``, ``True`` as
    ``"True"``); None when blank. Only for telling an OUT written then from this rule's ids
    (``runs.out.check_earlier_ids``)."""
    if value is None or isinstance(value, (dict, list)) or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value)
    return text if text.strip() else None


def read_otherwise(report_id: str) -> bool:
    """Whether a report's id may be one :func:`earlier_id_text` made from a value :func:`id_text` now reads
    otherwise: spaces around it, true/false, or a number that is not in integer digits (``1.0``, ``2.5``). Cheap, so
    that a resume reads its input again only when OUT holds such an id."""
    if report_id != report_id.strip() or report_id in ("True", "False"):
        return True
    if report_id.lstrip("-").isdigit():
        return False
    try:
        float(report_id)
    except ValueError:
        return False
    return True
