from tests.services.inprocess import RunningGateway


async def test_create_and_get(gateway: RunningGateway) -> None:
    async with gateway.client() as client:
        body = {"run_id": "r", "call_id": "c", "spec": {"fn": "f", "kwargs": {}}}
        created = await client.post("/function_calls", json=body)
        assert created.status_code == 200, created.text
        got = await client.get("/function_calls/c")
        assert got.json()["status"]["approved"] is None
