"""Small helpers shared by several test files."""
import secrets


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
    """A random server-side session id, as `components.state.session_id` makes from a cookie."""
    return secrets.token_hex(16)
