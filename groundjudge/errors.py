"""Every error groundjudge raises, under one root.

::

    GroundjudgeError
    ├── ConfigError                 bad option, unknown provider, bad model string
    │   └── MissingAPIKeyError      the provider's key variable is not set
    ├── InputError                  a bad sample: names the row and the field
    ├── PromptError                 unknown prompt, missing or extra variables
    ├── CacheMissError              cache-only mode and the answer is not cached
    ├── BudgetExceededError         the next call would pass the USD or call cap
    ├── DeferredCallError           a cache miss recorded for a batch instead of sent (LLMClient.deferring)
    ├── BatchPendingError           a batch did not end within the wait allowed; a rerun resumes it
    ├── LLMError                    anything from talking to a model
    │   ├── ProviderError           the provider answered with an error (.status, .retryable, .retry_at)
    │   │   ├── RateLimitError      429
    │   │   ├── ServerError         5xx, or a body that is not what the wire format promises
    │   │   ├── AuthenticationError 401 / 403
    │   │   └── BadRequestError     400 / 404 / 422 and other 4xx
    │   ├── LLMTimeoutError         no answer within the timeout (.maybe_billed)
    │   ├── LLMConnectionError      could not reach the server, or lost it before the reply (.maybe_billed)
    │   ├── RefusalError            the model declined to answer (billed, not retried, not cached)
    │   └── InvalidOutputError      no valid, accepted JSON after the re-asks (has .raw, .partial)
    └── NLIError                    the local NLI model could not be loaded or run

Retryable errors carry ``retryable = True``; after the last attempt the same typed error is raised with
``attempts`` set. Library code raises these; only the CLI turns them into exit codes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from groundjudge.models import Usage


class GroundjudgeError(Exception):
    """Root of every groundjudge error."""

    retryable: bool = False


class ConfigError(GroundjudgeError):
    """An option, model string or configuration value is wrong. ``settings``: where the fix is to set ``Config``
    fields, each field and the value to give it (None: unknown here, or to be left unset; a refused ``score
    --resume`` names OUT's), for a caller that names them as its own options."""

    def __init__(self, *args: object, settings: dict[str, str | None] | None = None) -> None:
        super().__init__(*args)
        self.settings: dict[str, str | None] = dict(settings or {})


class ArgumentError(ConfigError, ValueError):
    """A function or class was handed a value it cannot take (a negative count, an unknown name, a file of another
    format). A ``ValueError`` too, so that pydantic validators and callers that catch ``ValueError`` keep working."""


class MissingAPIKeyError(ConfigError):
    """The environment variable holding a provider's API key is not set."""

    def __init__(self, provider: str, variable: str) -> None:
        super().__init__(f"{provider} needs an API key: set the environment variable {variable}")
        self.provider = provider
        self.variable = variable


class InputError(GroundjudgeError):
    """A sample cannot be used; names the row and the field."""

    def __init__(self, message: str, *, row: int | str | None = None, field: str | None = None) -> None:
        where = []
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.row = row
        self.field = field
        self.reason = message


class PromptError(GroundjudgeError):
    """A prompt file is missing, malformed, or rendered with the wrong variables."""


class CacheMissError(GroundjudgeError):
    """Cache-only mode was asked for and the answer is not in the cache."""

    damaged: bool = False
    """The entry is there but not JSON (:meth:`groundjudge.cache.Cache.get`): filling the cache again replaces it."""

    run: Any = None
    """Raised by ``Evaluator.run``: the :class:`~groundjudge.review.notebook.Run` of the answers finished before the
    stop (None elsewhere)."""


class BudgetExceededError(GroundjudgeError):
    """The next call would take spending past the configured cap; it was not made."""

    run: Any = None
    """Raised by ``Evaluator.run``: the :class:`~groundjudge.review.notebook.Run` of the answers finished before the
    stop (None elsewhere)."""

    def __init__(self, message: str, *, spent_usd: float, calls: int) -> None:
        super().__init__(message)
        self.spent_usd = spent_usd
        self.calls = calls


class DeferredCallError(GroundjudgeError):
    """Inside ``LLMClient.deferring()``, a call that missed the cache was recorded for a batch, not sent.

    Not an LLM failure and not retryable: the batch runner answers the call into the cache, and the caller runs
    the stage again (or calls directly) to read it. ``key`` is the cache key of the deferred call.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class BatchPendingError(GroundjudgeError):
    """A provider batch did not end within the wait allowed; it keeps running and a rerun collects it.

    ``batch_ids`` are the live batches and ``state_path`` the file that lets the next run resume them.
    """

    run: Any = None
    """Raised by ``Evaluator.run``: the :class:`~groundjudge.review.notebook.Run` of the answers finished before the
    stop (None elsewhere)."""

    def __init__(self, message: str, *, batch_ids: list[str], state_path: str) -> None:
        super().__init__(message)
        self.batch_ids = batch_ids
        self.state_path = state_path


class LLMError(GroundjudgeError):
    """Talking to a language model failed; ``attempts`` and the ``usage`` billed before failing are attached.

    ``maybe_billed``: the request may have reached the provider, which may bill it, but no reply came back (a
    timeout, a connection lost after sending). The client counts such a call at its worst case, marked unsettled
    (:attr:`groundjudge.models.Usage.unsettled_calls`); an error status or a connection never made was not billed.
    """

    attempts: int = 1
    usage: Usage | None = None
    maybe_billed: bool = False


class ProviderError(LLMError):
    """The provider answered with an error status.

    ``retry_after`` is the wait in seconds the server asked for (Retry-After), if any. ``retry_at`` is set when
    that wait did not fit in what was left of the retry budget: the call failed at once, and the message says when
    to try again (seconds and UTC time).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.retry_at: datetime | None = None


class RateLimitError(ProviderError):
    """HTTP 429: too many requests (retried, honouring Retry-After)."""


class ServerError(ProviderError):
    """HTTP 5xx or a malformed response body (retried)."""


class AuthenticationError(ProviderError):
    """HTTP 401/403: the key is wrong or lacks permission (not retried)."""


class BadRequestError(ProviderError):
    """HTTP 400/404/422 and other 4xx: the request itself is wrong (not retried)."""


class LLMTimeoutError(LLMError):
    """The server did not answer within the timeout (retried). ``maybe_billed`` unless the adapter knows the request
    never left (a connect or pool timeout)."""

    retryable = True
    maybe_billed = True


class LLMConnectionError(LLMError):
    """The server could not be reached, or the connection broke before its reply (retried). ``maybe_billed`` unless
    the adapter knows the request never left (the connection was never made)."""

    retryable = True
    maybe_billed = True


class RefusalError(LLMError):
    """The model declined to answer (a refusal, or a content filter); its tokens are billed and in ``usage``."""

    def __init__(self, message: str, *, refusal: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class InvalidOutputError(LLMError):
    """No acceptable answer after the re-asks: invalid JSON, a schema error, or a failed semantic check.

    ``raw`` is the last reply's text, ``errors`` the problem of each try, and ``partial`` the last reply that was
    valid for the schema but failed the caller's check (None when no reply was schema-valid).
    """

    def __init__(self, message: str, *, raw: str, errors: list[str], partial: Any = None) -> None:
        super().__init__(message)
        self.raw = raw
        self.errors = errors
        self.partial = partial


class NLIError(GroundjudgeError):
    """The local NLI model could not be loaded or run."""
