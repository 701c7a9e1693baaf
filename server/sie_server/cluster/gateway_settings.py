"""The gateway's settings: the fields it shares with the server plus its own, each default written once."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, field_validator

from sie_server.catalog.loader import Catalog
from sie_server.settings import Cli, CommonSettings


class GatewaySettings(CommonSettings):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, populate_by_name=True)
    CLI: ClassVar[Mapping[str, Cli]] = {
        **CommonSettings.CLI,
        "nats_url": Cli(flag="--nats", env="SIE_NATS"),
        "routes": Cli(flag="--route", repeat=True, no_env=True),
        "timeout_s": Cli(env="SIE_GATEWAY_TIMEOUT_S"),
        "api_keys": Cli(flag="--api-key", repeat=True, also_env=("SIE_AUTH_TOKENS",)),  # the older name still works
        "loaded_catalog": Cli(hidden=True),
    }

    nats_url: str = Field(default="nats://127.0.0.1:4222", description="NATS URL")
    loaded_catalog: Catalog | None = Field(
        default=None,
        alias="catalog",
        exclude=True,
        description="the catalog, loaded and checked at start from models_dir and models (cli.gateway_settings)",
    )
    routes: list[tuple[str, str]] = Field(
        default_factory=list, description="PATTERN=POOL, repeatable: models matching PATTERN go to POOL"
    )
    default_pool: str = Field(default="default", description="the pool of models no --route matches")
    hold_s: float = Field(default=30.0, ge=0, description="how long a request waits for a worker when none is up")
    timeout_s: float = Field(default=600.0, gt=0, description="how long a request waits for its replies")
    split_items: int = Field(default=32, ge=1, description="encode and extract requests go out in slices this big")

    @field_validator("routes", mode="before")
    @classmethod
    def _pattern_equals_pool(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        routes = []
        for rule in value:
            if isinstance(rule, str):
                pattern, _, pool = rule.partition("=")
                if not pattern or not pool:
                    raise ValueError(f"{rule!r}: use PATTERN=POOL, e.g. 'Qwen/*=gpu'")
                rule = (pattern, pool)
            routes.append(rule)
        return routes

    @property
    def auth_tokens(self) -> tuple[str, ...]:
        """The API keys under the gateway's older name (``SIE_AUTH_TOKENS``)."""
        return self.api_keys

    @property
    def catalog(self) -> Catalog:
        if self.loaded_catalog is None:
            raise RuntimeError("the gateway's catalog is loaded at start (cli.gateway_settings); none was given")
        return self.loaded_catalog

    def pool_for(self, model_id: str) -> str:
        return next((pool for pattern, pool in self.routes if fnmatch.fnmatch(model_id, pattern)), self.default_pool)

    @property
    def pools(self) -> list[str]:
        return sorted({self.default_pool, *(pool for _, pool in self.routes)})
