"""What one LLM call costs at one price: at most (what the budget holds while it is in flight), as expected (dry
runs, the limiter's tokens-per-minute bucket) and as billed (a reply's usage)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from groundjudge import errors
from groundjudge.llm.accounting import Price
from groundjudge.llm.base import LLMRequest, LLMResponse, Provider, billed_text, never_sent
from groundjudge.llm.packing import pack_size
from groundjudge.models import Message, Usage

__all__ = ["CallCosts"]

# Tokens a provider adds beyond the text: per message (role, separators) and per request (tool-use system prompt).
_MESSAGE_OVERHEAD = 8
_REQUEST_OVERHEAD = 1024


class CallCosts:
    """The costs of one client's calls (:attr:`groundjudge.llm.client.LLMClient.costs`): its provider, its price
    (None: unpriced, every cost 0 and the calls counted as unpriced) and its ``max_tokens``, and the mean output
    per answer of the replies seen so far.
    """

    def __init__(self, provider: Provider, price: Price | None, max_tokens: int) -> None:
        self.provider = provider
        self.price = price
        self.max_tokens = max_tokens
        self._out_tokens_seen = [0, 0]  # total output tokens, answers
        self._lock = threading.Lock()

    def worst_case_cost(self, request: LLMRequest, *, batch: bool = False) -> float:
        """USD a call can cost at most: what the budget holds while it is in flight.

        Input: one token per UTF-8 byte of the messages and the schema, or of the request as the adapter sends it
        (:func:`~groundjudge.llm.base.billed_text`: the schema may go twice) where that is more, plus per-message
        and fixed overheads; no tokenizer makes more tokens than that. Each input token at the dearest input rate
        (an Anthropic cache write costs more than plain input). Output: max_tokens. ``batch``: at the batch price.
        """
        if self.price is None:
            return 0.0
        text_bytes = sum(len(m.content.encode()) for m in request.messages)
        schema_bytes = len(json.dumps(request.schema).encode())
        sent_bytes = len(billed_text(self.provider, request).encode())
        input_bytes = max(text_bytes + schema_bytes, sent_bytes)
        input_tokens = input_bytes + _MESSAGE_OVERHEAD * len(request.messages) + _REQUEST_OVERHEAD
        usd = (input_tokens * self.price.max_input_rate + request.max_tokens * self.price.output_per_mtok) / 1e6
        return usd * self.price.batch_factor if batch else usd

    def expected_tokens(self, call: LLMRequest | Sequence[Message]) -> tuple[int, int]:
        """Realistic (input, output) tokens of one call: ~4 characters a token of what the provider bills, plus 8 a
        message; the mean output per answer seen so far (256 before any) times the answers the request asks for (a
        packed request: :func:`~groundjudge.llm.packing.pack_size`), at most its ``max_tokens``. A request is
        counted as the adapter sends it, the schema in its structured-output format included
        (:func:`~groundjudge.llm.base.billed_text`); bare messages by their text alone. What dry runs price and the
        limiter's tokens-per-minute bucket takes before a reply says the real usage."""
        if isinstance(call, LLMRequest):
            chars, n_messages = len(billed_text(self.provider, call)), len(call.messages)
            answers, cap = pack_size(call), call.max_tokens
        else:
            chars, n_messages = sum(len(m.content) for m in call), len(call)
            answers, cap = 1, self.max_tokens
        input_tokens = chars // 4 + _MESSAGE_OVERHEAD * n_messages
        with self._lock:
            out_total, n = self._out_tokens_seen
        return input_tokens, min(cap, answers * (out_total // n if n else 256))

    def saw_output(self, request: LLMRequest, response: LLMResponse) -> None:
        """Count a billed reply's output for :meth:`expected_tokens`, per answer it carries."""
        with self._lock:
            self._out_tokens_seen[0] += response.output_tokens
            self._out_tokens_seen[1] += pack_size(request)

    def estimate_cost(self, call: LLMRequest | Sequence[Message], *, batch: bool = False) -> float:
        """Realistic USD of one call, for dry runs (:meth:`expected_tokens`; give the request, from
        :meth:`request_for` or a deferred call, to count the schema the provider bills too); ``batch=True`` at the
        batch API's price. The budget does not use it: calls in flight hold :meth:`worst_case_cost`."""
        if self.price is None:
            return 0.0
        input_tokens, output_tokens = self.expected_tokens(call)
        return self.price.cost(input_tokens, output_tokens, batch=batch)

    def unanswered(self, request: LLMRequest, *, batch: bool = False) -> Usage:
        """What a call sent with no reply counts as (a timeout or a connection lost after sending: the provider may
        have answered and billed it in full): one call at :meth:`worst_case_cost`, that cost marked unsettled
        (:attr:`~groundjudge.models.Usage.unsettled_cost_usd`), no tokens (none known); unpriced with no price. The
        budget holds it at the same worst case it held while the call was in flight, so the cap still holds.
        ``batch``: a request of a provider batch submitted and not collected, at the batch price."""
        cost = self.worst_case_cost(request, batch=batch)
        return Usage(
            calls=1,
            cost_usd=cost,
            unsettled_calls=1,
            unsettled_cost_usd=cost,
            unpriced_calls=int(self.price is None),
        )

    def failed_send(self, request: LLMRequest, exc: BaseException) -> Usage:
        """What a send of ``request`` that raised ``exc`` counts, also set as a groundjudge error's ``usage``: a call
        sent with no reply (an :class:`~groundjudge.errors.LLMError` whose ``maybe_billed`` is set), :meth:`unanswered`;
        any other groundjudge error (an error status, a connection never made) nothing: it was not billed. Anything
        else (Ctrl-C's KeyboardInterrupt, an exception from outside groundjudge) stopped the send wherever it was, maybe
        after the request left: :meth:`unanswered`, unless the HTTP client's error under it is one of connecting
        (:func:`~groundjudge.llm.base.never_sent`)."""
        if not isinstance(exc, errors.GroundjudgeError):
            return Usage() if never_sent(exc) else self.unanswered(request)
        if not (isinstance(exc, errors.LLMError) and exc.maybe_billed):
            return Usage()
        exc.usage = self.unanswered(request)
        return exc.usage

    def usage_of(self, response: LLMResponse, *, batch: bool = False) -> Usage:
        """What one billed response cost: its tokens, cached and written ones at their rates, at the batch price
        when it came through a batch API; with no price, an unpriced call (its cost unknown, not 0)."""
        cost = 0.0
        if self.price is not None:
            cost = self.price.cost(
                response.input_tokens,
                response.output_tokens,
                cached_input_tokens=response.cached_input_tokens,
                cache_write_tokens=response.cache_write_tokens,
                batch=batch,
            )
        return Usage(
            calls=1,
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            cost_usd=cost,
            cached_input_tokens=response.cached_input_tokens,
            cache_write_tokens=response.cache_write_tokens,
            unpriced_calls=int(self.price is None),
        )
