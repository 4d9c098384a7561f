"""LangGraph against a live gateway, with SQLite checkpoints on disk: a node asks for
approval and the thread pauses (`interrupt`); a person decides in the console (Chromium) or
through the API; the resumer hands the decision back (`Command(resume=...)`), by long-poll or
by the gateway's signed webhook, and the node's side effect happens once. A rejection takes
the rejection path with the person's reason. A resumer killed while it waits is started
again and resumes the thread, once. A tool may also simply block (`require_approval`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
import uvicorn
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from playwright.async_api import Page, expect

from channels.web.auth import create_sign_in_link
from gateway.security.crypto import sign_webhook
from hitl_client import AsyncClient, Client
from hitl_client.langgraph import (
    CALL_ID_KEY,
    AsyncResumer,
    Graph,
    Resumer,
    WebhookHandler,
    arequest_approval,
    ask_human,
    request_approval,
)
from tests.channels.web.browser import find_chromium, launched_browser
from tests.client.helpers import responder_key
from tests.client.langgraph_graph import RUN_ID, build, side_effects
from tests.client.proxy import FlakyProxy
from tests.conftest import missing_service
from tests.factories import rid_of
from tests.helpers import add_webhook, eventually
from tests.services.inprocess import RunningGateway
from tests.services.net import bound_socket, port_of

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    if find_chromium() is None:
        missing_service("Chromium (apt package chromium)")
    async with launched_browser() as browser:
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        yield await context.new_page()


@pytest.fixture
async def agent_key(sqlite_gateway: RunningGateway) -> str:
    return await sqlite_gateway.new_key("default", name="langgraph agent")


@pytest.fixture
async def person(sqlite_gateway: RunningGateway) -> AsyncIterator[AsyncClient]:
    """Someone who answers through the API, with a responder's key."""
    key = await responder_key(sqlite_gateway)
    async with AsyncClient(sqlite_gateway.api_base, key) as client:
        yield client


@contextmanager
def deploy_graph(
    gateway: RunningGateway, key: str, tmp_path: Path
) -> Iterator[tuple[Graph, Client]]:
    with (
        Client(gateway.api_base, key, run_id=RUN_ID) as client,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        yield build(client, saver, tmp_path / "effects.txt"), client


def thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


async def pause(graph: Graph, config: RunnableConfig, state: dict[str, Any]) -> list[str]:
    """Run the graph until it waits on the gateway; the call_ids it waits on."""
    paused = await asyncio.to_thread(graph.invoke, state, config)
    return [item.value[CALL_ID_KEY] for item in paused["__interrupt__"]]


async def requests_of(gateway: RunningGateway, path: str = "/function_calls") -> list[Any]:
    async with gateway.client() as client:
        listed = await client.get(path, params={"run_id": RUN_ID})
    assert listed.status_code == 200, listed.text
    items: list[Any] = listed.json()["items"]
    return items


async def decide_in_console(
    page: Page, gateway: RunningGateway, call_id: str, *, reason: str | None = None
) -> None:
    """The operator signs in with a one-time link, opens the request and approves it, or
    rejects it with `reason`."""
    await page.goto(await create_sign_in_link(gateway.context(), base_url=gateway.base_url))
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()
    await page.goto(f"{gateway.base_url}/console/requests/{await rid_of(gateway, call_id)}")
    if reason is None:
        await page.get_by_role("button", name="Approve", exact=True).click()
        await expect(page.locator(".notice")).to_contain_text("Recorded: approved")
    else:
        await page.get_by_label("Reason").fill(reason)
        await page.get_by_role("button", name="Reject", exact=True).click()
        await expect(page.locator(".notice")).to_contain_text("Recorded: rejected")


async def test_approved_in_the_console_the_thread_resumes_and_deploys_once(
    sqlite_gateway: RunningGateway, agent_key: str, page: Page, tmp_path: Path
) -> None:
    gateway, config = sqlite_gateway, thread("t-approve")
    with deploy_graph(gateway, agent_key, tmp_path) as (graph, client):
        [call_id] = await pause(graph, config, {"env": "prod"})
        [made] = await requests_of(gateway)
        assert made["call_id"] == call_id and made["gateway_status"] == "pending"
        where = made["spec"]["state"]["langgraph"]
        assert where["thread_id"] == "t-approve" and where["checkpoint_ns"].startswith("deploy:")
        assert graph.get_state(config).next == ("deploy",)  # paused, kept by the checkpointer

        resumer = Resumer(graph, client)
        resuming = asyncio.create_task(asyncio.to_thread(resumer.resume, config))
        await decide_in_console(page, gateway, call_id)
        output = await asyncio.wait_for(resuming, 30)

        assert output["outcome"] == "deployed to prod"
        assert side_effects(tmp_path / "effects.txt") == ["deployed to prod"]
        assert len(await requests_of(gateway)) == 1  # the node's second run found its request
        assert await asyncio.to_thread(resumer.resume, config) is None  # nothing left
        assert side_effects(tmp_path / "effects.txt") == ["deployed to prod"]


async def test_rejected_in_the_console_the_graph_takes_its_rejection_path_with_the_reason(
    sqlite_gateway: RunningGateway, agent_key: str, page: Page, tmp_path: Path
) -> None:
    gateway, config = sqlite_gateway, thread("t-reject")
    with deploy_graph(gateway, agent_key, tmp_path) as (graph, client):
        [call_id] = await pause(graph, config, {"env": "prod"})
        resuming = asyncio.create_task(asyncio.to_thread(Resumer(graph, client).resume, config))
        await decide_in_console(page, gateway, call_id, reason="not on a Friday")
        output = await asyncio.wait_for(resuming, 30)

    assert output["outcome"] == "not deployed: not on a Friday"
    assert side_effects(tmp_path / "effects.txt") == []


async def run_resumer(api_base: str, key: str, tmp_path: Path) -> asyncio.subprocess.Process:
    env = os.environ | {
        "HUMANLAYER_API_BASE": api_base,
        "HUMANLAYER_API_KEY": key,
        "PYTHONPATH": str(REPO),  # the tests' graph, wherever the packages are installed
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.client.langgraph_resumer",
        str(tmp_path / "checkpoints.db"),
        str(tmp_path / "effects.txt"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )


async def resumed_by_a_fresh_resumer(gateway: RunningGateway, key: str, tmp_path: Path) -> Any:
    process = await run_resumer(gateway.api_base, key, tmp_path)
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    return json.loads(out.decode().splitlines()[-1])


async def test_a_resumer_killed_while_it_waits_is_restarted_and_resumes_the_thread_once(
    sqlite_gateway: RunningGateway, agent_key: str, person: AsyncClient, tmp_path: Path
) -> None:
    gateway = sqlite_gateway
    with deploy_graph(gateway, agent_key, tmp_path) as (graph, _client):
        [call_id] = await pause(graph, thread("t-kill"), {"env": "staging"})

    async with FlakyProxy(upstream=gateway.base_url) as proxy:
        first = await run_resumer(proxy.base_url + "/humanlayer/v1", agent_key, tmp_path)
        polls = f"/humanlayer/v1/function_calls/{call_id}"

        async def long_polling() -> bool:  # a first look, then the held GET of its wait
            return len(proxy.of("GET", polls)) >= 2

        await eventually(long_polling)
        first.send_signal(signal.SIGKILL)
        assert await first.wait() == -signal.SIGKILL
        await person.respond_function_call(call_id, approved=True, comment="go")

    resumed = await resumed_by_a_fresh_resumer(gateway, agent_key, tmp_path)
    assert resumed["t-kill"]["outcome"] == "deployed to staging"
    assert side_effects(tmp_path / "effects.txt") == ["deployed to staging"]
    assert await resumed_by_a_fresh_resumer(gateway, agent_key, tmp_path) == {}
    assert side_effects(tmp_path / "effects.txt") == ["deployed to staging"]


class Release(TypedDict, total=False):
    version: str
    region: str
    shipped: str


def release_graph(client: Client, saver: SqliteSaver) -> Graph:
    """Two branches that wait at once: an approval and a question."""

    def ship(state: Release) -> Release:
        call = request_approval(client, "ship", {"version": state["version"]})
        return {"shipped": state["version"] if call.approved else f"no: {call.reason}"}

    def where(state: Release) -> Release:
        return {"region": ask_human(client, "Which region first?").answer or ""}

    graph = StateGraph(Release)
    graph.add_node("ship", ship)
    graph.add_node("where", where)
    graph.add_edge(START, "ship")
    graph.add_edge(START, "where")
    graph.add_edge("ship", END)
    graph.add_edge("where", END)
    return graph.compile(checkpointer=saver)


async def test_each_pending_interrupt_is_resumed_with_its_own_decision(
    sqlite_gateway: RunningGateway, agent_key: str, person: AsyncClient, tmp_path: Path
) -> None:
    gateway, config = sqlite_gateway, thread("t-both")
    with (
        Client(gateway.api_base, agent_key, run_id=RUN_ID) as client,
        SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):
        graph = release_graph(client, saver)
        waiting = await pause(graph, config, {"version": "2.1"})
        [question] = [c["call_id"] for c in await requests_of(gateway, "/human_contacts")]
        [approval] = [c["call_id"] for c in await requests_of(gateway)]
        assert sorted(waiting) == sorted([question, approval])
        resumer = Resumer(graph, client)

        await person.respond_human_contact(question, response="eu-west")
        await asyncio.to_thread(resumer.resume, config, wait=False)  # the answer in hand only
        assert graph.get_state(config).values["region"] == "eu-west"
        [still] = resumer.waiting(config)
        assert still.value[CALL_ID_KEY] == approval

        await person.respond_function_call(approval, approved=True)
        output = await asyncio.to_thread(resumer.resume, config)

    assert output == {"version": "2.1", "region": "eu-west", "shipped": "2.1"}
    assert len(await requests_of(gateway)) == 1  # each branch's second run found its request
    assert len(await requests_of(gateway, "/human_contacts")) == 1


async def test_an_async_graph_resumes_every_waiting_thread_of_its_run(
    sqlite_gateway: RunningGateway, agent_key: str, person: AsyncClient, tmp_path: Path
) -> None:
    gateway = sqlite_gateway
    async with (
        AsyncClient(gateway.api_base, agent_key, run_id=RUN_ID) as client,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver,
    ):

        async def ship(state: Release) -> Release:
            call = await arequest_approval(client, "ship", {"version": state["version"]})
            return {"shipped": call.arguments["version"] if call.approved else call.reason}

        builder = StateGraph(Release)
        builder.add_node("ship", ship)
        builder.add_edge(START, "ship")
        graph = builder.compile(checkpointer=saver)
        for name, version in [("a", "1.0"), ("b", "2.0")]:
            await graph.ainvoke({"version": version}, thread(name))
        calls = {c["spec"]["kwargs"]["version"]: c["call_id"] for c in await requests_of(gateway)}
        await person.respond_function_call(calls["1.0"], approved=True)
        await person.respond_function_call(calls["2.0"], approved=False, comment="too soon")

        outputs = await AsyncResumer(graph, client).resume_run(RUN_ID)
        assert outputs == {
            "a": {"version": "1.0", "shipped": "1.0"},
            "b": {"version": "2.0", "shipped": "too soon"},
        }
        assert await AsyncResumer(graph, client).resume_run(RUN_ID) == {}


@asynccontextmanager
async def serving(app: WebhookHandler, listening: socket.socket) -> AsyncIterator[None]:
    """`app` under uvicorn on the `listening` socket (`bound_socket`)."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[listening]))

    async def started() -> bool:
        return server.started

    try:
        await eventually(started)
        yield
    finally:
        server.should_exit = True
        await task


def signed(secret: str, body: bytes, *, at: int | None = None) -> dict[str, str]:
    timestamp = int(time.time()) if at is None else at
    return {
        "webhook-id": "msg_replayed",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign_webhook(secret, "msg_replayed", timestamp, body),
        "content-type": "application/json",
    }


async def test_the_gateways_webhook_resumes_the_thread_and_a_bad_signature_is_refused(
    sqlite_gateway: RunningGateway, agent_key: str, person: AsyncClient, tmp_path: Path
) -> None:
    gateway, config = sqlite_gateway, thread("t-hook")
    effects = tmp_path / "effects.txt"
    listening = bound_socket()
    port = port_of(listening)
    url = f"http://127.0.0.1:{port}/hooks/langgraph"
    secret = await add_webhook(gateway, url)
    with deploy_graph(gateway, agent_key, tmp_path) as (graph, client):
        async with serving(WebhookHandler(Resumer(graph, client), secret), listening):
            [call_id] = await pause(graph, config, {"env": "prod"})
            decided = await person.respond_function_call(call_id, approved=True)

            async def deployed() -> bool:  # the node ran, and its checkpoint is written
                outcome = graph.get_state(config).values.get("outcome")
                return side_effects(effects) == ["deployed to prod"] == [outcome]

            await eventually(deployed)  # the gateway's delivery resumed the thread

            event = {"type": "function_call.completed", "event": decided.model_dump(mode="json")}
            body = json.dumps(event).encode()
            async with httpx.AsyncClient() as http:
                again = await http.post(url, content=body, headers=signed(secret, body))
                forged = await http.post(url, content=body, headers=signed("whsec_AAAA", body))
                stale = signed(secret, body, at=int(time.time()) - 3600)
                replayed = await http.post(url, content=body, headers=stale)
                unsigned = await http.post(url, content=body)

    assert again.status_code == 200 and again.json() == {"thread_id": "t-hook"}
    assert side_effects(effects) == ["deployed to prod"]  # a second delivery resumes nothing
    assert [forged.status_code, replayed.status_code, unsigned.status_code] == [401] * 3
    assert "no signature matches" in forged.json()["detail"]
    assert "too old" in replayed.json()["detail"]


async def test_a_tool_node_blocks_on_require_approval_and_reads_the_rejection(
    sqlite_gateway: RunningGateway, agent_key: str, person: AsyncClient
) -> None:
    gateway = sqlite_gateway
    ran: list[str] = []
    with Client(gateway.api_base, agent_key, run_id=RUN_ID) as client:

        @tool
        @client.require_approval()
        def drop_table(name: str) -> str:
            """Drop a database table."""
            ran.append(name)
            return f"dropped {name}"

        builder = StateGraph(MessagesState)
        builder.add_node("tools", ToolNode([drop_table]))
        builder.add_edge(START, "tools")
        tools: Graph = builder.compile()

        async def answer(approved: bool, comment: str | None = None) -> None:
            async def asked() -> bool:
                return any(c["gateway_status"] == "pending" for c in await requests_of(gateway))

            await eventually(asked)
            listed = await requests_of(gateway)
            [pending] = [c["call_id"] for c in listed if c["gateway_status"] == "pending"]
            await person.respond_function_call(pending, approved=approved, comment=comment)

        async def call_tool(name: str, approved: bool, comment: str | None = None) -> str:
            call = {"name": "drop_table", "args": {"name": name}, "id": f"tc-{name}"}
            state: dict[str, Any] = {"messages": [AIMessage(content="", tool_calls=[call])]}
            running = asyncio.to_thread(tools.invoke, state)
            result, _ = await asyncio.gather(running, answer(approved, comment))
            message = result["messages"][-1]
            assert isinstance(message, ToolMessage)
            return str(message.content)

        assert await call_tool("sessions", approved=True) == "dropped sessions"
        denied = await call_tool("users", approved=False, comment="that one holds the accounts")

    assert denied == "User denied drop_table with message: that one holds the accounts"
    assert ran == ["sessions"]
