"""What every SIE Haystack component shares: its settings, the backend built from them, and Haystack's
``to_dict`` / ``from_dict`` (the API key as a Haystack ``Secret``, never written out as a value)."""

from __future__ import annotations

import inspect
from typing import Any, Literal, TypeVar

from haystack import Document, default_from_dict, default_to_dict
from haystack.utils import Secret, deserialize_secrets_inplace

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend

C = TypeVar("C", bound="SIEComponent")


def document_text(doc: Document, meta_fields: list[str], separator: str) -> str:
    """The text a document is embedded or scored from: its chosen meta values, then its content."""
    meta = [str(doc.meta[key]) for key in meta_fields if doc.meta.get(key) is not None]
    return separator.join([*meta, doc.content or ""])


def default_api_key() -> Secret:
    """``$SIE_API_KEY`` when it is set, else no key."""
    return Secret.from_env_var("SIE_API_KEY", strict=False)


class SIEComponent:
    """``model``; ``base_url`` (``None``: ``$SIE_URL``, else http://127.0.0.1:8080); ``priority``;
    ``instruction`` (queries only); ``batch_size`` (texts per request); ``timeout`` (seconds per call);
    ``api_key`` (a Haystack ``Secret``; by default ``$SIE_API_KEY`` when set)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        priority: Literal["interactive", "batch"] | None = None,
        instruction: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: Secret | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.priority = priority
        self.instruction = instruction
        self.batch_size = batch_size
        self.timeout = timeout
        self.api_key = api_key if api_key is not None else default_api_key()
        self.backend = SIEBackend.from_settings(self)

    def _init_parameters(self) -> dict[str, Any]:
        """This component's own constructor arguments beyond the shared ones (overridden where there are)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """Haystack's form of this component: the constructor arguments it takes, the key as a ``Secret``."""
        shared = {
            "model": self.model,
            "base_url": self.base_url,
            "priority": self.priority,
            "instruction": self.instruction,
            "batch_size": self.batch_size,
            "timeout": self.timeout,
            "api_key": self.api_key.to_dict(),
        }
        taken = inspect.signature(type(self).__init__).parameters
        params = {key: value for key, value in {**shared, **self._init_parameters()}.items() if key in taken}
        return default_to_dict(self, **params)

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        deserialize_secrets_inplace(data["init_parameters"], keys=["api_key"])
        return default_from_dict(cls, data)

    def close(self) -> None:
        self.backend.close()
