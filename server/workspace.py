"""Each browser's workspace on the server: the one source of truth of what its page shows.

A workspace is a small record in the shared store, keyed by the session (so every worker reads
the same one): the dataset loaded, the domain chosen, the typed and random query rectangles,
the releases made (as records: key, mechanism, label, ε, split, parameters, seed, points per
user, private or not, description, box name, time) and which of them is shown. The page's
controls, map and panels are rendered from it, so a reload, a second tab or another worker
shows the same thing.

Every spend is one idempotent action: the click makes a request id; `once(sid, rid, action)`
records the id in the server's database (`server.clicks`), runs the action and keeps its result
here (any picklable value); the same id again (a callback fired twice, a retried request, another
worker, the workspace gone) gets the first run's result, or word that it was answered, and
charges nothing.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager, suppress

from redis.exceptions import LockError

from . import clicks, releases, services, sessions, state

KEPT_REQUESTS = 64        # request ids remembered per workspace (a click is retried within seconds)
KEPT_RELEASES = 32        # release records kept per workspace (the accounts keep every charge)
REQUEST_ID_CHARS = 64     # a request id is a short random string made by the page
PENDING_WAIT = 120        # seconds a repeated request waits for the first run's result
ANSWERED = {"error": "this click was answered before and is not run twice; its result is no "
                     "longer kept here (the budget ledger shows what it charged)"}
MAX_QUERIES = 1000        # typed and random rectangles kept per workspace


def _key(sid: str) -> str:
    """The workspace's entry: the session's own (its quota, never another's), and pinned, so
    room made for its releases never drops it (`store.PINNED`)."""
    return f"workspace:{sid}:page"


@contextmanager
def _locked(sid: str):
    """The workspace's lock across processes (held only around a read and a write; never taken
    twice by one thread, as the store's locks are not re-entrant)."""
    try:
        with services.current().store.lock(_key(sid)):
            yield
    except LockError:              # Redis: not acquired in time, or expired while held
        raise LookupError("the server is busy with this page's previous action; try again in a "
                          "moment") from None


def _save(sid: str, ws: dict) -> dict:
    if not services.current().store.set(_key(sid), ws):
        raise LookupError(state.FULL)
    return ws


def get(sid: str) -> dict:
    """A copy of this session's workspace ({} for a new one)."""
    return dict(services.current().store.get(_key(sid)) or {})


def update(sid: str, **changes) -> dict:
    """Change fields of the workspace under its lock (across processes) and return it; a change
    to what it already holds writes nothing (page loads repeat the domain and what is shown)."""
    with _locked(sid):
        ws = get(sid)
        if all(k in ws and ws[k] == v for k, v in changes.items()):
            return ws
        return _save(sid, {**ws, **changes})


def add_release(sid: str, summary: dict) -> None:
    """Keep a release record (the page's release summary and the time it was made; the newest
    KEPT_RELEASES) and make it the one the page shows."""
    with _locked(sid):
        ws = get(sid)
        kept = [r for r in ws.get("releases", []) if r["key"] != summary["key"]]
        ws["releases"] = (kept + [{**summary, "time": time.time()}])[-KEPT_RELEASES:]
        ws["shown"] = summary["key"]
        _save(sid, ws)


def shown(sid: str) -> dict | None:
    """The release record the page shows, if any."""
    ws = get(sid)
    return next((r for r in ws.get("releases", []) if r["key"] == ws.get("shown")), None)


def latest(sid: str, fingerprint: str, domain) -> dict | None:
    """The newest release record of this dataset on this domain (its release may be gone)."""
    for r in reversed(get(sid).get("releases", [])):
        if releases.key_fingerprint(r["key"]) == fingerprint and releases.key_domain(r["key"]) == domain:
            return r
    return None


def show(sid: str, key: str | None) -> None:
    """Make the release with this key the one the page shows (None: nothing)."""
    update(sid, shown=key)


def valid_request(rid) -> bool:
    return isinstance(rid, str) and 8 <= len(rid) <= REQUEST_ID_CHARS and rid.isascii() \
        and all(c.isalnum() or c == "-" for c in rid)


def once(sid: str, rid, action: Callable[[], dict]) -> dict:
    """Run `action` (which may spend) once per request id: the id is recorded in the server's
    database before the action runs (`server.clicks`, kept as long as charges matter, not as
    long as this workspace), so a repeat (a callback fired twice, another worker, a retry after
    the workspace expired) waits for the first one's result instead of running again, and a
    first run that failed half-way is never run again either. The result is kept here."""
    if not valid_request(rid):
        raise LookupError("the request carried no valid request id; press the button again")
    if not clicks.claim(services.current().accounts, sid, rid):
        return _wait_for(sid, rid)
    result = {"error": "the server failed while doing this; the budget ledger shows whether it "
                       "was charged"}
    try:
        result = action()
    finally:
        try:
            with _locked(sid):
                ws = get(sid)
                _remember(ws, rid, result)
                _save(sid, ws)
        except LookupError:          # not kept (a full store): a repeat is told it was answered
            pass
        with suppress(LookupError):
            clicks.settle(services.current().accounts, sid, rid)
    return result


def _remember(ws: dict, rid: str, result) -> None:
    ws["requests"] = dict(list({**ws.get("requests", {}), rid: result}.items())[-KEPT_REQUESTS:])


def _wait_for(sid: str, rid: str) -> dict:
    """The result of a request another thread or worker is running (or has run): read once the
    database says it ended (the result is kept before that)."""
    end = time.monotonic() + PENDING_WAIT
    while time.monotonic() < end:
        if clicks.settled(services.current().accounts, sid, rid):
            return get(sid).get("requests", {}).get(rid, dict(ANSWERED))
        time.sleep(0.1)
    return {"error": "this click is still being answered on the server; reload the page in a "
                     "while to see its result (it was not run twice)"}


def use_dataset(sid: str, info: dict) -> None:
    """Make this dataset (its summary, `state.dataset_summary`) the workspace's current one; on
    a full store it is not kept (the next page load then opens on the last one kept)."""
    try:
        update(sid, dataset=info)
    except LookupError:
        pass


def use_domain(sid: str, preset: str, box: list) -> None:
    """Remember the domain control's choice (a preset's name, or CUSTOM with the typed sides);
    on a full store the choice is not kept (the next page load then opens on the dataset's box)."""
    try:
        update(sid, domain={"preset": preset, "box": list(box)})
    except LookupError:
        pass


def set_queries(sid: str, rects: list) -> None:
    """Remember the typed and random rectangles ([west, south, east, north] each) of the data
    loaded; on a full store they are not kept (a reload then shows none)."""
    try:
        update(sid, queries=[list(map(float, r)) for r in rects][:MAX_QUERIES])
    except LookupError:
        pass


def set_drawn(sid: str, rects: list) -> None:
    """Remember the rectangles drawn on the map (the drawing tool keeps them only in the page):
    a reload brings them back among the kept rectangles (`page`); on a full store not kept."""
    try:
        update(sid, drawn=[list(map(float, r)) for r in rects][:MAX_QUERIES])
    except LookupError:
        pass


def _kept_queries(sid: str, ws: dict) -> list:
    """The typed and random rectangles with those drawn before this page load appended: the
    drawing tool cannot be given shapes back, so drawn ones return as kept ones (R labels),
    moved in the workspace too so that a later drawing does not forget them."""
    queries, drawn = ws.get("queries", []), ws.get("drawn") or []
    if not drawn:
        return queries
    merged = (queries + drawn)[:MAX_QUERIES]
    try:
        update(sid, queries=merged, drawn=[])
    except LookupError:
        pass
    return merged


def _shapes(ws: dict) -> dict:
    """The workspace's fields of the counts-per-shape choice (components/shapes_panel)."""
    return {k: v for k, v in ws.items() if k.startswith("shapes_")}


def page(sid: str, default_sample: str) -> dict:
    """What a page load shows, from the workspace: the current dataset (the default sample for a
    new workspace, or when an upload is no longer on the server: `gone` names it), the domain
    chosen, the release record shown if it is of that dataset, the typed and random rectangles
    asked of it and the shapes chosen for counts per shape; and whether this browser is the
    data owner."""
    ws = get(sid)
    info, gone = ws.get("dataset"), None
    if info is not None and info.get("origin") == "server" and not sessions.is_owner():
        info = None                       # the owner's data, in a browser that is no longer one
    elif info is not None:
        try:
            state.points(sid, info["fingerprint"])
        except LookupError:
            info, gone = None, ws["dataset"]["name"]
    if info is None:         # the default sample: its rectangles are kept unless other data was dropped
        return {"dataset": state.use_sample(sid, default_sample), "domain": None, "release": None,
                "queries": [] if ws.get("dataset") else _kept_queries(sid, ws), "gone": gone,
                "owner": sessions.is_owner(),
                "uploads": sessions.public_uploads(), "shapes": _shapes(ws)}
    rec = shown(sid)
    if rec is not None and releases.key_fingerprint(rec["key"]) != info["fingerprint"]:
        rec = None
    return {"dataset": info, "domain": ws.get("domain"), "release": rec,
            "queries": _kept_queries(sid, ws), "gone": None, "owner": sessions.is_owner(),
            "uploads": sessions.public_uploads(), "shapes": _shapes(ws)}
