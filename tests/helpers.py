"""Small helpers shared by several test files."""
import secrets
import socket
import time


def all_keys(obj):
    """Every dict key anywhere inside a JSON-like object (to prove what an export contains)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from all_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from all_keys(v)


def number(text: str) -> int:
    """A whole number as the tables show it ('12,345')."""
    return int(text.replace(",", ""))


def shown(x: float) -> str:
    """A private answer as the tables show it: whole people, at least 0, with separators."""
    return f"{max(0, round(x)):,}"


def spy_on_exact_counts(monkeypatch) -> list:
    """Record the name of every PointData whose exact counts are read (histogram, true_counts)
    from now on: evidence that a step reads only the data it should."""
    from dp.points import PointData
    read = []
    for name in ("histogram", "true_counts"):
        real = getattr(PointData, name)

        def spy(self, *a, _real=real, **kw):
            read.append(self.name)
            return _real(self, *a, **kw)
        monkeypatch.setattr(PointData, name, spy)
    return read


def new_sid() -> str:
    """A random server-side session id, as `server.state.session_id` makes from a cookie."""
    return secrets.token_hex(16)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float = 30):
    """Poll until condition() is true (the caller then asserts on state, never on time)."""
    end = time.monotonic() + timeout
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)


def dash_call(client, first_output: str, values: dict):
    """Call the app's callback whose first output is `first_output` ("id.property") and whose
    inputs hold the first key of `values` (the input that changed), as the page does, with
    `values` ("id.property" -> value) for its inputs and states (missing: None)."""
    trigger = next(iter(values))
    deps = client.get("/_dash-dependencies").get_json()
    dep = next(d for d in deps
               if d["output"].strip(".").split("...")[0].split("@")[0] == first_output
               and any(f"{i['id']}.{i['property']}" == trigger for i in d["inputs"]))
    outputs = [{"id": part.rsplit(".", 1)[0], "property": part.rsplit(".", 1)[1].split("@")[0]}
               for part in dep["output"].strip(".").split("...")]

    def spec(items):
        return [{"id": i["id"], "property": i["property"],
                 "value": values.get(f"{i['id']}.{i['property']}")} for i in items]
    body = {"output": dep["output"], "outputs": outputs if dep["output"].startswith("..") else outputs[0],
            "inputs": spec(dep["inputs"]), "state": spec(dep["state"]), "changedPropIds": [trigger]}
    return client.post("/_dash-update-component", json=body)
