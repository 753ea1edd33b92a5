"""The official A2A Python SDK (a2a-sdk 1.x) as the client of a Hermes workspace's A2A
route, in both protocol versions (docs/a2a.md); driven by tests/e2e/a2a.rs.

Environment: A2A_URL (the workspace's A2A URL), A2A_KEY (a key with the a2a scope),
CHAT_KEY (a key without it), OTHER_KEY (another key with the a2a scope), ANSWER (what the fleet's fake model answers). Exits non-zero
on the first mismatch. Prints one JSON line: the context id of each version's conversation.

The cancel half sends a message the fake model answers with a tool call the test holds,
waits for the test to write `running` on stdin (the call is held), cancels the task while it
runs, and expects it canceled: the test releases the tool call once the run's stop is
recorded.
"""

import asyncio
import json
import os
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

URL = os.environ["A2A_URL"]
KEY = os.environ["A2A_KEY"]
CHAT_KEY = os.environ["CHAT_KEY"]
OTHER_KEY = os.environ["OTHER_KEY"]
ANSWER = os.environ["ANSWER"]
VERSIONS = ("1.0", "0.3")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def message(text, context=None):
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context:
        m.context_id = context
    return m


def answer(task):
    return "".join(p.text for a in task.artifacts for p in a.parts)


def client(http, card, version, streaming):
    """A client of the card's interface of `version` alone."""
    only = AgentCard()
    only.CopyFrom(card)
    del only.supported_interfaces[:]
    only.supported_interfaces.extend(
        i for i in card.supported_interfaces if i.protocol_version == version
    )
    config = ClientConfig(httpx_client=http, streaming=streaming)
    return ClientFactory(config).create(only)


async def send(c, request):
    return [e async for e in c.send_message(request)]


async def converse(http, card, version):
    """Send, get, continue the context, stream: the context's id and the first task's."""
    c = client(http, card, version, streaming=False)
    events = await send(c, SendMessageRequest(message=message(f"my name is Ada ({version})")))
    check(len(events) == 1 and events[0].HasField("task"), f"{version}: one task {events}")
    task = events[0].task
    check(task.status.state == TaskState.TASK_STATE_COMPLETED, f"{version}: completed {task}")
    check(answer(task) == ANSWER, f"{version}: the answer {task}")
    check(task.context_id, f"{version}: a context")

    got = await c.get_task(GetTaskRequest(id=task.id))
    check(got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED, f"{version}: get {got}")
    check(answer(got) == ANSWER, f"{version}: get's answer {got}")
    texts = [p.text for m in got.history for p in m.parts]
    check(texts[0] == f"my name is Ada ({version})" and texts[-1] == ANSWER, f"{version}: history {texts}")

    # The same context: the model is given the first turn (the test reads what it was sent).
    again = await send(
        c, SendMessageRequest(message=message(f"what is my name? ({version})", task.context_id))
    )
    second = again[0].task
    check(second.context_id == task.context_id, f"{version}: same context {second}")
    check(second.status.state == TaskState.TASK_STATE_COMPLETED, f"{version}: second {second}")

    s = client(http, card, version, streaming=True)
    events = await send(s, SendMessageRequest(message=message(f"stream please ({version})")))
    kinds = [e.WhichOneof("payload") for e in events]
    check(kinds[0] == "task" and kinds[-1] == "status_update", f"{version}: stream {kinds}")
    check(events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED, f"{version}: first {events[0]}")
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    check(states[0] == TaskState.TASK_STATE_WORKING, f"{version}: working {states}")
    check(states[-1] == TaskState.TASK_STATE_COMPLETED, f"{version}: completed {states}")
    pieces = [e.artifact_update for e in events if e.HasField("artifact_update")]
    check(pieces and pieces[-1].last_chunk, f"{version}: a last chunk {pieces}")
    final = "".join(p.text for p in pieces[-1].artifact.parts)
    check(final == ANSWER, f"{version}: the streamed answer {final!r}")
    check(
        all(e.status_update.task_id == events[0].task.id for e in events if e.HasField("status_update")),
        f"{version}: one task",
    )

    # A run that fails is a failed task, its reason the status message.
    failed = (await send(c, SendMessageRequest(message=message(f"failing task ({version})"))))[0].task
    check(failed.status.state == TaskState.TASK_STATE_FAILED, f"{version}: failed {failed}")
    reason = "".join(p.text for p in failed.status.message.parts)
    check(reason and not failed.artifacts, f"{version}: a reason, no answer {failed}")

    # Unknown tasks, and a task that ended, by the SDK's own errors.
    try:
        await c.get_task(GetTaskRequest(id=str(uuid.uuid4())))
        raise AssertionError(f"{version}: an unknown task was found")
    except TaskNotFoundError:
        pass
    try:
        await c.cancel_task(CancelTaskRequest(id=task.id))
        raise AssertionError(f"{version}: a completed task was canceled")
    except TaskNotCancelableError:
        pass
    return task.context_id, task.id


async def cancel(http, card, version):
    """A running task is canceled."""
    c = client(http, card, version, streaming=False)
    request = SendMessageRequest(
        message=message(f"slow task ({version})"),
        configuration=SendMessageConfiguration(return_immediately=True),
    )
    task = (await send(c, request))[0].task
    check(
        task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING),
        f"{version}: accepted at once {task}",
    )
    # The test says when the run's tool call is held: it runs then, and a stop finds its row.
    said = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    check(said.strip() == "running", f"{version}: the test's signal {said!r}")
    got = await c.get_task(GetTaskRequest(id=task.id))
    check(got.status.state == TaskState.TASK_STATE_WORKING, f"{version}: working {got}")
    canceled = await c.cancel_task(CancelTaskRequest(id=task.id))
    check(canceled.status.state == TaskState.TASK_STATE_CANCELED, f"{version}: canceled {canceled}")
    got = await c.get_task(GetTaskRequest(id=task.id))
    check(got.status.state == TaskState.TASK_STATE_CANCELED, f"{version}: stays canceled {got}")


async def rpc(http, body, headers=None):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = await http.post(URL, content=content, headers={"content-type": "application/json", **(headers or {})})
    check(r.status_code == 200, f"JSON-RPC over HTTP 200: {r.status_code} {r.text}")
    return r.json()


async def bad_requests(http):
    """The specification's error codes, with the request's id when it has one."""
    cases = [
        (b"{not json", -32700, None),
        ({"jsonrpc": "2.0", "id": 1}, -32600, 1),
        ({"jsonrpc": "2.0", "id": 2, "method": "tasks/explode", "params": {}}, -32601, 2),
        ({"jsonrpc": "2.0", "id": "3", "method": "SendMessage", "params": {"message": {"role": "ROLE_USER"}}}, -32602, "3"),
        ({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": str(uuid.uuid4())}}, -32001, 4),
    ]
    for body, code, rid in cases:
        got = await rpc(http, body)
        check(got.get("error", {}).get("code") == code and got.get("id") == rid, f"{body!r}: {got}")
    got = await rpc(
        http,
        {"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": str(uuid.uuid4())}},
        {"A2A-Version": "9.9"},
    )
    check(got["error"]["code"] == -32009, f"an unknown version: {got}")


async def anothers(task_id):
    """Another key with the a2a scope does not see a task it did not send."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {OTHER_KEY}"}, timeout=30) as other:
        for method in ("GetTask", "tasks/get"):
            got = await rpc(other, {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": task_id}})
            check(got.get("error", {}).get("code") == -32001, f"another key's task: {got}")


async def refusals():
    """No key, and a key without the a2a scope, are refused before anything is read."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    async with httpx.AsyncClient(timeout=30) as anon:
        r = await anon.post(URL, json=ping)
        check(r.status_code == 401, f"no key: {r.status_code}")
        r = await anon.get(f"{URL}/.well-known/agent-card.json")
        check(r.status_code == 401, f"no key, card: {r.status_code}")
        r = await anon.post(URL, json=ping, headers={"Authorization": f"Bearer {CHAT_KEY}"})
        check(r.status_code == 403, f"a chat key: {r.status_code}")


async def main():
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http:
        card = await A2ACardResolver(http, URL).get_agent_card()
        versions = sorted(i.protocol_version for i in card.supported_interfaces)
        check(versions == ["0.3", "1.0"], f"both interfaces: {card}")
        check(all(i.url == URL and i.protocol_binding == "JSONRPC" for i in card.supported_interfaces), f"{card}")
        check(card.capabilities.streaming, "streaming declared")
        contexts = {}
        for version in VERSIONS:
            contexts[version], task_id = await converse(http, card, version)
            await anothers(task_id)
        await bad_requests(http)
        await refusals()
        for version in VERSIONS:
            await cancel(http, card, version)
    print(json.dumps({"contexts": contexts}))


asyncio.run(main())
