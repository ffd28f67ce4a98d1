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
