"""``/docs`` (Swagger UI) and ``/redoc`` served offline, from assets shipped in the ``fastapi-offline`` package.

FastAPI's own pages load their JavaScript and CSS from a CDN, so on a machine without internet they stay
blank. Create the app with ``docs_url=None, redoc_url=None`` and call :func:`install_docs` instead: the same
pages, with every asset answered by this server under :data:`ASSETS_URL`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs-assets"
# swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png (Swagger UI 5, ReDoc 2)
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))
# Swagger UI would otherwise fetch a validity badge from validator.swagger.io
SWAGGER_PARAMETERS = {"validatorUrl": None}


def install_docs(app: FastAPI) -> None:
    """Add ``/docs``, its OAuth2 redirect page, ``/redoc`` and their assets to ``app``; nothing when it has no
    OpenAPI schema (``openapi_url=None``)."""
    openapi_url = app.openapi_url
    if openapi_url is None:
        return
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    redirect_url = app.swagger_ui_oauth2_redirect_url

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{redirect_url}" if redirect_url else None,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={**SWAGGER_PARAMETERS, **(app.swagger_ui_parameters or {})},
        )

    if redirect_url:

        @app.get(redirect_url, include_in_schema=False)
        async def swagger_ui_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
