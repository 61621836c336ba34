#!/usr/bin/env python3
"""A malformed-message corpus for `tentaflake-worker mcp` (issue 15), run by
test-controller-mcp.sh as the controller's uid: python3 mcp-malformed.py BIN WORKSPACE.

Each entry is written as one line; its answer (a JSON-RPC error with the expected code, a tool
result with isError, or nothing for a notification) is read, then a ping must be answered: after
every hostile message the server still answers, in order, with nothing stray. Every read has a
bounded deadline (a harness timeout, not a timing assertion). Prints ok:/FAIL: lines; exit 1 on
any failure."""
import json, os, select, subprocess, sys, time

BIN, WS = sys.argv[1], sys.argv[2]
DEADLINE = 60
fails = 0


def report(ok, what, detail=""):
    global fails
    if ok:
        print(f"ok: {what}")
    else:
        fails += 1
        print(f"FAIL: {what} {detail}"[:2000])


p = subprocess.Popen([BIN, "mcp", "--workspace", WS], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
buf = b""


def read_line():
    global buf
    end = time.monotonic() + DEADLINE
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([p.stdout], [], [], left)
        if not r:
            return None
        chunk = os.read(p.stdout.fileno(), 1 << 20)
        if not chunk:
            return None
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    return json.loads(line)


def send(raw):
    p.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")
    p.stdin.flush()


ping_no = 0


def still_answers(what):
    global ping_no
    ping_no += 1
    pid = f"ping-{ping_no}"
    send(json.dumps({"jsonrpc": "2.0", "id": pid, "method": "ping"}).encode())
    m = read_line()
    report(m is not None and m.get("id") == pid and m.get("result") == {}, f"{what}: then a ping is answered", m)


def expect_error(what, raw, code, rid=None):
    send(raw)
    m = read_line()
    ok = m is not None and "error" in m and m["error"].get("code") == code and m.get("id") == rid
    report(ok, f"{what}: error {code}", m)
    still_answers(what)


def expect_tool_error(what, args, name="run", needle=None):
    send(json.dumps({"jsonrpc": "2.0", "id": what, "method": "tools/call",
                     "params": {"name": name, "arguments": args}}).encode())
    m = read_line()
    r = (m or {}).get("result") or {}
    text = "".join(c.get("text", "") for c in r.get("content", []))
    ok = m is not None and m.get("id") == what and r.get("isError") is True and (needle is None or needle in text)
    report(ok, f"{what}: a tool error" + (f" naming {needle}" if needle else ""), m)
    still_answers(what)


def expect_nothing(what, raw):
    send(raw)
    still_answers(what)  # the next line must be the ping's answer, not a reply to this


def call(params):
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode()


# initialize and version negotiation
for asked, want in [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
                    ("2024-11-05", "2024-11-05"), ("1999-01-01", "2025-11-25")]:
    send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                     "params": {"protocolVersion": asked, "capabilities": {},
                                "clientInfo": {"name": "corpus", "version": "1"}}}).encode())
    m = read_line()
    report(m is not None and m.get("result", {}).get("protocolVersion") == want,
           f"initialize asking {asked}: answered {want}", m)
send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}).encode())
read_line()
expect_nothing("notifications/initialized", b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

# not JSON, or not one message
expect_error("truncated JSON", b'{"jsonrpc":"2.0","id":1,"method":"ping"', -32700)
expect_error("not JSON at all", b"hello there", -32700)
expect_error("a lone brace", b"{", -32700)
expect_error("duplicate keys", b'{"jsonrpc":"2.0","id":4,"id":5,"method":"ping"}', -32700)
expect_error("an escaped NUL", b'{"jsonrpc":"2.0","id":6,"method":"pi\\u0000ng"}', -32700)
expect_error("a raw NUL", b'{"jsonrpc":"2.0","id":6,"method":"pi\x00ng"}', -32700)
expect_error("invalid UTF-8", b'{"jsonrpc":"2.0","id":6,"method":"\xff\xfe"}', -32700)
expect_error("a lone surrogate", b'{"jsonrpc":"2.0","id":6,"method":"\\ud800"}', -32700)
expect_error("a number beyond 64 bits", b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}', -32700)
expect_error("nesting 100000 deep", b"[" * 100000 + b"]" * 100000, -32700)
expect_error("a batch", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600)
expect_error("an empty batch", b"[]", -32600)
expect_error("a bare number", b"42", -32600)
expect_error("a bare string", b'"ping"', -32600)
expect_error("null", b"null", -32600)

# not a valid request
expect_error("no jsonrpc member", b'{"id":1,"method":"ping"}', -32600, 1)
expect_error("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600, 1)
expect_error("jsonrpc as a number", b'{"jsonrpc":2.0,"id":1,"method":"ping"}', -32600, 1)
expect_error("an id that is an object", b'{"jsonrpc":"2.0","id":{},"method":"ping"}', -32600)
expect_error("an id that is a real", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600)
expect_error("an id that is a boolean", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600)
expect_error("a method that is a number", b'{"jsonrpc":"2.0","id":2,"method":5}', -32600, 2)
expect_error("no method", b'{"jsonrpc":"2.0","id":2}', -32600, 2)
expect_error("an unknown method", b'{"jsonrpc":"2.0","id":3,"method":"resources/list"}', -32601, 3)
expect_error("a made-up method", b'{"jsonrpc":"2.0","id":3,"method":"tools/explode"}', -32601, 3)
expect_error("params as an array", b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}', -32602, 3)
expect_error("params as a string", b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"run"}', -32602, 3)
expect_error("initialize without protocolVersion", b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}', -32602, 3)
expect_error("initialize with a numeric protocolVersion",
             b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":20250618}}', -32602, 3)
expect_error("tools/list with a numeric cursor", b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":1}}', -32602, 3)
expect_error("tools/call without params", b'{"jsonrpc":"2.0","id":7,"method":"tools/call"}', -32602, 7)
expect_error("tools/call without a name", call({"arguments": {}}), -32602, 7)
expect_error("tools/call with a numeric name", call({"name": 1}), -32602, 7)
expect_error("tools/call with arguments as a string", call({"name": "run", "arguments": "argv"}), -32602, 7)
expect_error("tools/call with arguments as an array", call({"name": "run", "arguments": ["true"]}), -32602, 7)
expect_error("tools/call of an unknown tool", call({"name": "rm", "arguments": {}}), -32602, 7)
expect_error("tools/call with _meta as a string", call({"name": "list", "_meta": "x"}), -32602, 7)
expect_error("tools/call with an object progressToken", call({"name": "list", "_meta": {"progressToken": {}}}), -32602, 7)

# MCP tasks (issue 35 item 2; negotiated above with 2025-11-25): a taskId is a request id or nothing
def task_req(method, params):
    m = {"jsonrpc": "2.0", "id": 9, "method": method}
    if params is not None:
        m["params"] = params
    return json.dumps(m).encode()


expect_error("tasks/get without params", task_req("tasks/get", None), -32602, 9)
expect_error("tasks/get with a numeric taskId", task_req("tasks/get", {"taskId": 5}), -32602, 9)
expect_error("tasks/get with a path as taskId", task_req("tasks/get", {"taskId": "../../etc/passwd"}), -32602, 9)
expect_error("tasks/get with a huge taskId", task_req("tasks/get", {"taskId": "a" * 100000}), -32602, 9)
expect_error("tasks/result with a null taskId", task_req("tasks/result", {"taskId": None}), -32602, 9)
expect_error("tasks/result of an unknown task", task_req("tasks/result", {"taskId": "no-such-task"}), -32602, 9)
expect_error("tasks/cancel of an unknown task", task_req("tasks/cancel", {"taskId": "no-such-task"}), -32602, 9)
expect_error("tasks/list with a cursor", task_req("tasks/list", {"cursor": "x"}), -32602, 9)
expect_error("tasks/explode", task_req("tasks/explode", {}), -32601, 9)
expect_error("tools/call with task as a string", call({"name": "run", "arguments": {"argv": ["true"]}, "task": "x"}), -32602, 7)
expect_error("tools/call with a negative ttl", call({"name": "run", "arguments": {"argv": ["true"]}, "task": {"ttl": -1}}), -32602, 7)
expect_error("tools/call of list as a task", call({"name": "list", "arguments": {}, "task": {}}), -32601, 7)

# a tool's bad arguments: tool results with isError, judged with the worker's limits
expect_tool_error("run-no-argv", {})
expect_tool_error("run-argv-null", {"argv": None}, needle="argv")
expect_tool_error("run-argv-string", {"argv": "true"}, needle="argv")
expect_tool_error("run-argv-ints", {"argv": [1, 2]}, needle="argv[0]")
expect_tool_error("run-argv-empty", {"argv": []}, needle="empty_argv")
expect_tool_error("run-argv0-empty", {"argv": [""]}, needle="empty_argv")
expect_tool_error("run-argv-300", {"argv": ["x"] * 300}, needle="argv_too_large")
expect_tool_error("run-argv-huge-string", {"argv": ["echo", "y" * (1 << 20)]}, needle="too_large")
expect_tool_error("run-timeout-string", {"argv": ["true"], "timeout_seconds": "300"}, needle="timeout_seconds")
expect_tool_error("run-timeout-real", {"argv": ["true"], "timeout_seconds": 300.0}, needle="timeout_seconds")
expect_tool_error("run-timeout-zero", {"argv": ["true"], "timeout_seconds": 0}, needle="out_of_range")
expect_tool_error("run-timeout-huge", {"argv": ["true"], "timeout_seconds": 10 ** 12}, needle="timeout_above_policy")
expect_tool_error("run-class-unknown", {"argv": ["true"], "action_class": "sudo"}, needle="bad_action_class")
expect_tool_error("run-class-number", {"argv": ["true"], "action_class": 1}, needle="action_class")
expect_tool_error("run-class-forbidden", {"argv": ["true"], "action_class": "forbidden"}, needle="forbidden")
expect_tool_error("run-reason-long", {"argv": ["true"], "reason": "r" * 2000}, needle="reason_too_large")
expect_tool_error("run-id-bad", {"argv": ["true"], "id": "../../etc/passwd"}, needle="bad_id")
expect_tool_error("run-id-upper", {"argv": ["true"], "id": "ABC"}, needle="bad_id")
expect_tool_error("run-unknown-field", {"argv": ["true"], "env": {"X": "1"}}, needle="env")
expect_tool_error("run-version-field", {"argv": ["true"], "version": 2}, needle="version")
expect_tool_error("run-wait-zero", {"argv": ["true"], "wait_seconds": 0}, needle="wait_seconds")
expect_tool_error("run-wait-string", {"argv": ["true"], "wait_seconds": "1"}, needle="wait_seconds")
expect_tool_error("result-no-id", {}, name="result")
expect_tool_error("result-bad-id", {"id": "../x"}, name="result", needle="bad_id")
expect_tool_error("result-negative-wait", {"id": "abc", "wait_seconds": -1}, name="result", needle="wait_seconds")
expect_tool_error("result-huge-wait", {"id": "abc", "wait_seconds": 10 ** 9}, name="result", needle="wait_seconds")
expect_tool_error("result-unknown-field", {"id": "abc", "follow": True}, name="result", needle="follow")
expect_tool_error("list-bad-recent", {"recent": "x"}, name="list", needle="recent")
expect_tool_error("list-unknown-field", {"all": True}, name="list", needle="all")

# notifications and responses are never answered
expect_nothing("an unknown notification", b'{"jsonrpc":"2.0","method":"notifications/whatever"}')
expect_nothing("cancelled for nothing", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"none"}}')
expect_nothing("cancelled with bad params", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}')
expect_nothing("a response to nothing", b'{"jsonrpc":"2.0","id":99,"result":{}}')
expect_nothing("an error response to nothing", b'{"jsonrpc":"2.0","id":99,"error":{"code":1,"message":"x"}}')
expect_nothing("a blank line", b"   ")

# framing and size
expect_error("a 5 MiB line", b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":"' + b"z" * (5 << 20) + b'"}}', -32600)
expect_error("a 20 MiB line", b"q" * (20 << 20), -32600)
send(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
m = read_line()
report(m is not None and m.get("id") == "crlf", "a CRLF line is one message", m)
long_id = "i" * 100000
send(json.dumps({"jsonrpc": "2.0", "id": long_id, "method": "ping"}).encode())
m = read_line()
report(m is not None and m.get("id") == long_id, "a 100 kB id is echoed", (m or {}).get("error"))
# two messages in one write, and one message split over two writes
p.stdin.write(b'{"jsonrpc":"2.0","id":"a","method":"ping"}\n{"jsonrpc":"2.0","id":"b","method":"ping"}\n{"jsonrpc":"2.0",')
p.stdin.flush()
p.stdin.write(b'"id":"c","method":"ping"}\n')
p.stdin.flush()
got = [read_line(), read_line(), read_line()]
report([g and g.get("id") for g in got] == ["a", "b", "c"], "framing across writes", got)

still_answers("the whole corpus")
report(p.poll() is None, "the server is still running")
p.stdin.close()
try:
    rc = p.wait(DEADLINE)
except subprocess.TimeoutExpired:
    p.kill()
    rc = None
report(rc == 0, "end of input: the server exits 0", rc)
sys.exit(1 if fails else 0)
