"""The two clients expose the same API, so neither can drift from the other."""

from __future__ import annotations

import inspect

import sie_sdk
from sie_sdk import SIEAsyncClient, SIEClient

SYNC_ONLY = {"close", "__enter__", "__exit__"}
ASYNC_ONLY = {"aclose", "__aenter__", "__aexit__"}


def public_methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}


def test_same_public_methods() -> None:
    assert public_methods(SIEClient) - {"close"} == public_methods(SIEAsyncClient) - {"aclose"}
    assert {"encode", "score", "extract", "generate", "list_models", "get_model", "health"} <= public_methods(SIEClient)


def test_same_signatures_and_async_methods_are_coroutines() -> None:
    for name in public_methods(SIEClient) - SYNC_ONLY:
        sync_sig = inspect.signature(getattr(SIEClient, name))
        async_method = getattr(SIEAsyncClient, name)
        assert inspect.iscoroutinefunction(async_method), name
        async_sig = inspect.signature(async_method)
        assert list(sync_sig.parameters) == list(async_sig.parameters), name
        for param in sync_sig.parameters.values():
            other = async_sig.parameters[param.name]
            assert (param.kind, param.default) == (other.kind, other.default), (name, param.name)
    assert inspect.signature(SIEClient.__init__).parameters.keys() == (
        inspect.signature(SIEAsyncClient.__init__).parameters.keys()
    )


def test_package_exports() -> None:
    assert sie_sdk.__version__ == "0.1.0"
    for name in sie_sdk.__all__:
        assert hasattr(sie_sdk, name), name
