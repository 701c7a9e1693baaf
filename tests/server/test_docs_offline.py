"""``/docs`` and ``/redoc`` load every script, stylesheet and icon from the server itself (no CDN)."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from sie_server.api.docs import install_docs

PAGES = ("/docs", "/redoc")


class _Assets(HTMLParser):
    """The URLs a browser fetches on its own while rendering a page: <script src>, <link href>, <img src>."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href", "img": "src"}.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


def asset_urls(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    return parser.urls


def offline_app() -> FastAPI:
    app = FastAPI(title="tiny", docs_url=None, redoc_url=None)

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    install_docs(app)
    return app


def check_page_is_self_contained(client: httpx.Client | TestClient, page: str) -> list[str]:
    base = str(client.base_url)
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    urls = asset_urls(r.text)
    assert any(url.endswith(".js") for url in urls), r.text
    for url in urls:
        absolute = urljoin(f"{base}{page}", url)
        assert urlsplit(absolute).netloc == urlsplit(base).netloc, f"{page} loads {url} from another host"
        asset = client.get(absolute)
        assert asset.status_code == 200 and asset.content, f"{url}: {asset.status_code}"
    # no other host named anywhere in the page (Google Fonts, the Swagger validator badge)
    assert "http://" not in r.text and "https://" not in r.text
    return urls


@pytest.mark.parametrize("page", PAGES)
def test_docs_pages_load_only_local_assets(page: str) -> None:
    with TestClient(offline_app()) as client:
        urls = check_page_is_self_contained(client, page)
    kinds = {url.rsplit(".", 1)[-1] for url in urls}
    assert kinds >= ({"js", "css"} if page == "/docs" else {"js"})


def test_swagger_ui_points_at_the_schema_and_it_still_answers() -> None:
    with TestClient(offline_app()) as client:
        html = client.get("/docs").text
        assert "url: '/openapi.json'" in html
        assert "validatorUrl" in html and '"validatorUrl": null' in html
        schema = client.get("/openapi.json")
        assert schema.status_code == 200 and "/hello" in schema.json()["paths"]
        assert "/docs" not in schema.json()["paths"]
        assert client.get("/docs/oauth2-redirect").status_code == 200


def test_root_path_prefixes_every_asset() -> None:
    # behind a proxy that strips /sie, the browser must ask for /sie/docs-assets/..., /sie/openapi.json
    with TestClient(offline_app(), root_path="/sie") as client:
        html = client.get("/docs").text
    assert "url: '/sie/openapi.json'" in html
    assert all(url.startswith("/sie/") for url in asset_urls(html))


def test_fastapi_default_docs_would_fail_this_check() -> None:
    # the check above catches what it is for: FastAPI's own page loads Swagger UI from a CDN
    with TestClient(FastAPI()) as client:
        urls = asset_urls(client.get("/docs").text)
    assert any(urlsplit(url).netloc not in ("", "testserver") for url in urls)


def test_no_docs_without_a_schema() -> None:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    install_docs(app)
    with TestClient(app) as client:
        assert client.get("/docs").status_code == 404


@pytest.mark.parametrize("page", PAGES)
def test_served_docs_are_offline(base_url: str, page: str) -> None:
    """The real server (and, with SIE_TEST_TARGET=gateway, the gateway) serves these pages."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        check_page_is_self_contained(client, page)
        assert client.get("/openapi.json").status_code == 200
