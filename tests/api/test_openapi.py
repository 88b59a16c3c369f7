from __future__ import annotations

from api.openapi import SCHEMAS, document
from api.routes import ROUTES


def test_every_route_is_documented_with_known_schemas() -> None:
    doc = document("1", secured=True)
    assert doc["openapi"] == "3.0.3"
    assert {(m, p) for p, ops in doc["paths"].items() for m in ops} == {
        (r.method.lower(), r.path) for r in ROUTES
    }
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for route in ROUTES:
        for name in (route.body_schema, route.ok_schema):
            assert name is None or name in SCHEMAS
        op = doc["paths"][route.path][route.method.lower()]
        path_params = {p["name"] for p in op["parameters"] if p["in"] == "path"}
        assert path_params == {part[1:-1] for part in route.path.split("/") if part[:1] == "{"}


def test_security_only_when_secured() -> None:
    secured = document("1", secured=True)
    publish = secured["paths"]["/events/{topic}"]["post"]
    # any one of: Basic, bearer, or the Cambria HMAC pair of headers
    assert publish["security"] == [
        {"basic": []},
        {"bearer": []},
        {"cambria": [], "cambriaDate": []},
    ]
    assert set(secured["components"]["securitySchemes"]) == {
        "basic",
        "bearer",
        "cambria",
        "cambriaDate",
        "token",  # sawmill's header
    }
    assert "401" in publish["responses"]
    assert secured["paths"]["/push/{topic}"]["post"]["security"] == [{"token": []}]
    create_key = secured["paths"]["/apiKeys/create"]["post"]
    assert create_key["security"] == publish["security"]
    assert "secret" in str(SCHEMAS["ApiKeyIssued"])
    assert "security" not in secured["paths"]["/metrics/{name}"]["get"]
    assert "security" not in secured["paths"]["/healthz"]["get"]
    open_doc = document("1", secured=False)
    assert "security" not in open_doc["paths"]["/events/{topic}"]["post"]
    assert "securitySchemes" not in open_doc["components"]
