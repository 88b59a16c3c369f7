"""``GET /docs``: the interactive OpenAPI page (issue 14 item 1), Swagger UI over /openapi.json.

Swagger UI's files come from the PyPI package ``swagger-ui-bundle`` (pinned in pyproject, so
the README's set-up installs it with everything else): nothing is fetched from a CDN and none of
its files is copied into this repository; the page works on an appliance without Internet.
The files are read once at start and served from memory under a strict Content-Security-Policy
(scripts and requests to this origin only; the online spec validator is switched off).
"""

from __future__ import annotations

from aiohttp import web
from swagger_ui_bundle import swagger_ui_path

from api.errors import NOT_FOUND, RESOURCE_NOT_FOUND, ApiError

PAGE = b"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>iot-api: interactive API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" href="data:,">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""
# no inline script: the policy below can forbid it
INIT = b"""window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  queryConfigEnabled: false,
  persistAuthorization: false
});
"""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)  # Swagger UI sets style attributes itself: 'unsafe-inline' for styles only
_TYPES = {".js": "text/javascript", ".css": "text/css"}
_BUNDLED = ("swagger-ui.css", "swagger-ui-bundle.js")


def _headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-cache",
    }


class DocsPageHandlers:
    def __init__(self) -> None:
        self._assets = {"init.js": INIT}
        for name in _BUNDLED:
            self._assets[name] = (swagger_ui_path / name).read_bytes()

    async def docs_page(self, _request: web.Request) -> web.Response:
        return web.Response(body=PAGE, content_type="text/html", headers=_headers())

    async def docs_asset(self, request: web.Request) -> web.Response:
        name = request.path.rsplit("/", 1)[-1]
        body = self._assets.get(name)
        if body is None:
            raise ApiError(404, RESOURCE_NOT_FOUND, NOT_FOUND)
        response = web.Response(
            body=body, content_type=_TYPES[name[name.rindex(".") :]], headers=_headers()
        )
        response.enable_compression()
        return response
