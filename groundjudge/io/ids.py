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
