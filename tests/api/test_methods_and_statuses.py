"""OPTIONS and 405 answers list exactly the methods of the path (`Allow`), and the OpenAPI
document lists the statuses each operation really answers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.services.inprocess import RunningGateway

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


async def openapi(gateway: RunningGateway) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=gateway.base_url) as anonymous:
        response = await anonymous.get("/openapi.json")
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def concrete(path: str) -> str:
    return path.replace("{call_id}", "some-call")


async def test_options_answers_each_paths_methods(sqlite_gateway: RunningGateway) -> None:
    paths = (await openapi(sqlite_gateway))["paths"]
    assert "/humanlayer/v1/function_calls" in paths
    async with httpx.AsyncClient(base_url=sqlite_gateway.base_url) as anonymous:
        for path, operations in paths.items():
            declared = {method.upper() for method in operations if method in HTTP_METHODS}
            response = await anonymous.options(concrete(path))
            assert response.status_code == 204, (path, response.status_code, response.text)
            allow = {method.strip() for method in response.headers["allow"].split(",")}
            assert allow == declared | {"OPTIONS"}, path


async def test_a_method_the_path_lacks_is_405_listing_every_method(
    sqlite_gateway: RunningGateway,
) -> None:
    async with sqlite_gateway.client() as client:
        response = await client.delete("/function_calls")  # GET and POST, from two routes
        assert response.status_code == 405
        assert response.headers["allow"] == "GET, OPTIONS, POST"
        assert response.json() == {"detail": "Method Not Allowed"}
        response = await client.put("/agent/function_calls/x/respond")
        assert response.status_code == 405
        assert response.headers["allow"] == "OPTIONS, POST"
        missing = await client.options("/no/such/path")
        assert missing.status_code == 404


EXPECTED = {
    ("post", "/humanlayer/v1/function_calls"): {200, 401, 409, 413, 422, 429, 503},
    ("get", "/humanlayer/v1/function_calls"): {200, 401, 422, 503},
    ("get", "/humanlayer/v1/function_calls/{call_id}"): {200, 401, 404, 422, 503},
    ("post", "/humanlayer/v1/agent/function_calls/{call_id}/respond"): {
        200,
        401,
        403,
        404,
        409,
        413,
        422,
        503,
    },
    ("post", "/humanlayer/v1/agent/human_contacts/{call_id}/escalate_email"): {
        200,
        401,
        403,
        404,
        409,
        413,
        422,
        503,
    },
    ("get", "/humanlayer/v1/agent/human_contacts/pending"): {200, 401, 422, 503},
    ("get", "/humanlayer/v1/project"): {200, 401, 503},
    ("get", "/healthz"): {200, 503},
    ("get", "/version"): {200},
    ("get", "/gateway/v1/jobs"): {200, 401, 403, 422, 503},
    ("get", "/gateway/v1/keys"): {200, 401, 403, 503},
    ("get", "/gateway/v1/calls/{call_id}/events"): {200, 401, 403, 404, 422, 503},
}


@pytest.mark.parametrize(("method", "path"), list(EXPECTED))
async def test_openapi_documents_the_statuses(
    sqlite_gateway: RunningGateway, method: str, path: str
) -> None:
    document = await openapi(sqlite_gateway)
    responses = document["paths"][path][method]["responses"]
    assert {int(code) for code in responses} == EXPECTED[(method, path)]
    for code, response in responses.items():
        if code != "200":
            schema = response["content"]["application/json"]["schema"]
            assert schema.get("$ref") in (
                "#/components/schemas/ErrorBody",
                "#/components/schemas/HTTPValidationError",
            ), (code, schema)


async def test_every_operation_documents_its_errors_and_the_api_key(
    sqlite_gateway: RunningGateway,
) -> None:
    document = await openapi(sqlite_gateway)
    assert document["components"]["securitySchemes"]["api_key"]["scheme"] == "bearer"
    assert "ErrorBody" in document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "200" in codes, (method, path)
            if path.startswith(("/humanlayer/v1/", "/gateway/v1/")) and "version" not in path:
                assert "503" in codes, (method, path)
                if not path.endswith("healthz"):
                    assert "401" in codes, (method, path)
                    assert operation.get("security") == [{"api_key": []}], (method, path)
            if method == "post":
                assert "413" in codes, (method, path)
