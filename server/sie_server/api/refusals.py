"""A refusal in the caller's own words. A compatible route translates its parameters onto the native call
(TEI's and Ollama's ``truncate: false`` become ``params.truncation: error``, OpenAI's ``response_format`` and
Ollama's ``format`` become ``grammar``); when the service refuses what that native parameter asked, the
answer names the parameter the caller sent, so no refusal leaves the caller guessing which of its
parameters the model cannot honour."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sie_server.errors import ErrorCode, InvalidInput, SIEError

#: what the service's refusals of an input past the model's token limit say (engine/long_encode.py)
OVER_LIMIT = ("limit of", "takes at most")
#: what its refusals of a grammar say (engine/generation.py; engine/grammar.py: "the JSON schema cannot be used")
GRAMMAR = ("grammar", "JSON schema", "regex", "cannot be used")


@contextmanager
def named(parameter: str, about: tuple[str, ...], *, when: bool = True) -> Iterator[None]:
    """Within the block, an INVALID_INPUT (raised here, or relayed from a worker) whose message is ``about``
    what ``parameter`` asked (holds one of those phrases) and does not name it gets ``parameter`` in front."""
    try:
        yield
    except SIEError as exc:  # an InvalidInput, or one relayed from a worker (contract/envelope.py's RemoteError)
        if exc.code is not ErrorCode.INVALID_INPUT or not when or parameter in exc.message:
            raise
        if not any(phrase in exc.message for phrase in about):
            raise
        raise InvalidInput(f"{parameter}: {exc.message}", status=exc.status, retry_after=exc.retry_after) from None
