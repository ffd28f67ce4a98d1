"""Server time of the dashboard's main paths: page load, release + map, a drawn rectangle, upload.

The real Flask server runs in-process and is driven with its test client. A minimal renderer
(`Browser`) keeps the layout from /_dash-layout and the page Dash Pages renders into it for the
address, follows /_dash-dependencies and POSTs to
/_dash-update-component the JSON payloads the browser would send (output, outputs, inputs,
state, changedPropIds), applies each response and fires the callbacks it triggers, so every
number includes Dash's request parsing, the callback and the response serialisation, but no
network or browser time. Reports median and max over --reps; nothing is asserted. Usage:
    python benchmarks/app_latency.py [--reps 5] [--n-upload 1000000]
"""
from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from app import create_app  # noqa: E402
from components import ids  # noqa: E402

NY = dp.PRESETS["New York (Manhattan & Brooklyn)"]
RELEASE_CB, MAP_CB, QUERY_CB, LOAD_CB = (f"{ids.RELEASE}.data", f"{ids.MAP_LAYERS}.children",
                                         f"{ids.QUERY_TABLE}.data", f"{ids.DATASET}.data")


def key(cid) -> str:
    """A component id as Dash writes it in payloads and responses."""
    return json.dumps(cid, sort_keys=True, separators=(",", ":")) if isinstance(cid, dict) else cid


def components(node):
    """Props of every component in a layout tree, in layout order."""
    if isinstance(node, list):
        for n in node:
            if isinstance(n, (list, dict)):
                yield from components(n)
    elif isinstance(node, dict) and isinstance(node.get("props"), dict) and "type" in node:
        yield node["props"]
        for v in node["props"].values():
            if isinstance(v, (list, dict)):
                yield from components(v)


def output_deps(output: str) -> list[dict]:
    """The outputs named by a dependency's output string ('..a.x...b.y..' or 'a.x')."""
    parts = output[2:-2].split("...") if output.startswith("..") else [output]
    return [dict(zip(("id", "property"), p.split("@")[0].rsplit(".", 1))) for p in parts]


def page_config(html: str) -> dict:
    """The Dash config a page carries in its index (the renderer reads it: `end_id` among it)."""
    found = re.search(r'<script id="_dash-config" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(found.group(1)) if found else {}


def poll_body(body: dict) -> dict:
    """A background callback's request body as its polls send it: every value nulled (a list of
    pattern-matched items stays as it is, as in the renderer)."""
    return {**body, **{part: [{**item, "value": None} if isinstance(item, dict) else item
                              for item in body[part]] for part in ("inputs", "state")}}


def updates(out: dict | None) -> dict:
    """A callback response's prop updates by component, set_props (the server alert) included."""
    if not out:
        return {}
    resp = out.get("response", {})
    for k, props in out.get("sideUpdate", {}).items():
        resp.setdefault(key(k) if isinstance(k, dict) else k, {}).update(props)
    return resp


class Browser:
    """A minimal dash-renderer: layout in memory, real callback payloads, chains followed."""

    def __init__(self, client):
        self.client, self.times = client, []
        self.end_id = ""            # the page's token, echoed by every callback request (its config)
        self.poll_jobs = True       # follow background callbacks' jobs to their end, as a page does
        self.progress = []          # the progress updates of the last background callback followed
        self.job = None             # the handles of the last background callback started

    def _time(self, fn, *a, **kw):
        """(response, seconds) of one request; an HTTP error stops the benchmark."""
        t = time.perf_counter()
        r = fn(*a, **kw)
        dt = time.perf_counter() - t
        if r.status_code not in (200, 204):
            raise RuntimeError(f"HTTP {r.status_code}: {r.get_data(as_text=True)[:300]}")
        return r, dt

    def open(self, path: str = "/", search: str = "") -> float:
        """GET the page's address, the layout and the dependencies (the server's session cookie is
        kept by the client), then the page Dash Pages renders for the address (its routing
        callback, which dcc.Location starts when it mounts): what a browser shows first. Returns
        their seconds; `load` then runs the page's initial callbacks."""
        r, t_index = self._time(self.client.get, path + search)
        self.end_id = page_config(r.get_data(as_text=True)).get("end_id", "")
        r, t_layout = self._time(self.client.get, "/_dash-layout")
        self.tree = r.get_json()
        r, t_deps = self._time(self.client.get, "/_dash-dependencies")
        self.deps = [d for d in r.get_json() if not d.get("clientside_function") and not d.get("no_output")]
        self.index()
        self.comps[ids.PAGES_LOCATION].update(pathname=path, search=search)
        route = next(d for d in self.deps if d["output"].startswith(f"..{ids.PAGES_CONTENT}."))
        self.times = []
        page = self.post(route, {f"{ids.PAGES_LOCATION}.pathname"})
        self.comps[ids.PAGES_CONTENT].update(page[ids.PAGES_CONTENT])
        self.index()
        return t_index + t_layout + t_deps + self.times[0][1]

    def load(self):
        """The page's initial callbacks, each chain followed (the page is open: `open`)."""
        self.times = []
        self.run(added=set(self.comps))

    def index(self):
        """Map component keys to their props (live references into the layout tree)."""
        self.comps = {key(p["id"]): p for p in components(self.tree) if "id" in p}

    def resolve(self, dep) -> list[tuple[str, str]]:
        """(component key, property) pairs a dependency refers to in the current layout."""
        pid, prop = dep["id"], dep["property"]
        if not pid.startswith("{"):
            return [(pid, prop)] if pid in self.comps else []
        pat = json.loads(pid)
        return [(k, prop) for k, p in self.comps.items() if isinstance(p["id"], dict)
                and p["id"].keys() == pat.keys()
                and all(v == ["ALL"] or p["id"][f] == v for f, v in pat.items())]

    def spec(self, dep, with_value=True):
        """One payload entry: {id, property[, value]}, or a list of them for an ALL pattern."""
        items = []
        for k, prop in self.resolve(dep):
            p = self.comps[k]
            item = {"id": p["id"], "property": prop}
            if with_value and (prop == "id" or prop in p):
                item["value"] = p["id"] if prop == "id" else p[prop]
            items.append(item)
        return items if dep["id"].startswith("{") else items[0]

    def runnable(self, dep) -> bool:
        """Whether a callback's plain outputs are in the layout (the renderer's condition)."""
        return all(o["id"].startswith("{") or o["id"] in self.comps for o in output_deps(dep["output"]))

    def post(self, dep, changed: set) -> dict:
        """One /_dash-update-component request, timed; returns the response's prop updates. A
        background callback's job is then polled as the renderer does (`follow`)."""
        outs = [self.spec(o, False) for o in output_deps(dep["output"])]
        body = {"output": dep["output"], "outputs": outs if dep["output"].startswith("..") else outs[0],
                "inputs": [self.spec(d) for d in dep["inputs"]],
                "state": [self.spec(d) for d in dep["state"]], "changedPropIds": sorted(changed)}
        args = {"endId": self.end_id} if self.end_id else {}
        if self.job and any(i in self.job["handles"].get("cancel", []) for i in dep["inputs"]):
            args["cancelJob"] = self.job["handles"]["job"]     # this callback cancels that job
        out = self._post(dep, body, args)
        if dep.get("background") and "cacheKey" in (out or {}):
            self.job = {"dep": dep, "body": body, "handles": out}
            return self.follow() if self.poll_jobs else {}
        return updates(out)

    def _post(self, dep, body: dict, args: dict) -> dict | None:
        """POST one callback request with these query arguments; its JSON (None for 204)."""
        url = "/_dash-update-component" + (f"?{urlencode(args)}" if args else "")
        r, dt = self._time(self.client.post, url, data=json.dumps(body), content_type="application/json")
        self.times.append((dep["output"], dt))
        return None if r.status_code == 204 else r.get_json()

    def follow(self) -> dict:
        """Poll the last background callback's job (`self.job`) every `interval` ms with its
        signed handles and the values nulled, as the renderer does, until its outputs come (or
        nothing: a job cancelled before it started); its progress updates go to `self.progress`.
        The waits between polls count in the callback's time, as the page waits them too.
        Returns the outputs' updates (`finish` applies them to the page)."""
        dep, handles, self.progress = self.job["dep"], self.job["handles"], []
        body = poll_body(self.job["body"])
        args = {"endId": self.end_id, "cacheKey": handles["cacheKey"], "job": handles["job"]}
        while True:
            t = time.perf_counter()
            time.sleep(dep["background"].get("interval", 500) / 1000)
            self.times.append((dep["output"], time.perf_counter() - t))
            out = self._post(dep, body, args)
            if out is None or "response" in out:
                self.job = None
                return updates(out)
            if "progress" in out:
                self.progress.append(out["progress"])

    def finish(self) -> dict:
        """Follow a job started with `poll_jobs` off to its end, its outputs applied to the page."""
        resp = self.follow()
        for k, props in resp.items():
            self.comps[k].update(props)
        if any("children" in props for props in resp.values()):
            self.index()
        self.run(changed=[(k, p) for k, props in resp.items() for p in props])
        return resp

    def trigger(self, pending: dict, changed, added, source: int | None = None):
        """Queue callbacks with a changed input, or (initial call) touching an added component;
        never `source`, the callback whose outputs changed them (Dash's renderer does not call a
        callback again for its own outputs, so one may have an input among them)."""
        for i, dep in enumerate(self.deps):
            if i == source:
                continue
            ins = [pair for d in dep["inputs"] for pair in self.resolve(d)]
            outs = [pair for d in output_deps(dep["output"]) for pair in self.resolve(d)]
            hit = {f"{k}.{p}" for k, p in changed if (k, p) in ins}
            new = not dep.get("prevent_initial_call") and any(k in added for k, _ in ins + outs)
            if (hit or new) and ins and self.runnable(dep):
                pending.setdefault(i, set()).update(hit)

    def run(self, changed=(), added=()):
        """Fire callbacks until quiet, one at a time, never before their inputs' producers."""
        pending = {}
        self.trigger(pending, changed, set(added))
        while pending:
            produces = {i: {pair for o in output_deps(self.deps[i]["output"]) for pair in self.resolve(o)}
                        for i in pending}
            ready = [i for i in sorted(pending) if not any(
                pair in produces[j] for j in pending if j != i
                for d in self.deps[i]["inputs"] for pair in self.resolve(d))]
            i = ready[0] if ready else min(pending)
            resp = self.post(self.deps[i], pending.pop(i))
            before = set(self.comps)
            for k, props in resp.items():
                self.comps[k].update(props)
            if any("children" in props for props in resp.values()):
                self.index()
            self.trigger(pending, [(k, p) for k, props in resp.items() for p in props],
                         set(self.comps) - before, source=i)

    def act(self, k: str, prop: str, value, state: dict | None = None) -> dict:
        """A user action: set state props, set `prop`, run the chain; seconds per callback."""
        for (sk, sp), v in (state or {}).items():
            self.comps[sk][sp] = v
        self.comps[k][prop] = value
        self.times = []
        self.run(changed=[(k, prop)])
        return self.seconds()

    def click(self, button: str, store: str, state: dict | None = None) -> dict:
        """A click on a button that spends: the page gives it a request id in the browser
        (`components.controls.request_ids`, a clientside callback this renderer skips, as it
        skips callbacks without outputs)."""
        n = self.comps[button].get("n_clicks", 0) + 1
        self.comps[button]["n_clicks"] = n
        return self.act(store, "data", {"id": secrets.token_hex(16), "n": n}, state)

    def seconds(self) -> dict:
        """Seconds per callback output of the last chain (its requests, and a background
        callback's waits between polls), plus their total."""
        out = {"total": sum(dt for _, dt in self.times)}
        for name, dt in self.times:
            out[name] = out.get(name, 0.0) + dt
        return out


def cb(secs: dict, which: str) -> float:
    """Seconds of the callback whose output string contains `which` (0 if it did not run)."""
    return sum(v for k, v in secs.items() if k != "total" and which in k)


def page_load(client) -> tuple[Browser, dict]:
    """A first visit: GET /, the layout, the dependencies and the page, then its initial callbacks."""
    b = Browser(client)
    t_open = b.open()
    b.load()
    secs = b.seconds()
    return b, {"layout": t_open, "chain": secs["total"], "full": t_open + secs["total"],
               "n": len(b.times), "release": cb(secs, RELEASE_CB)}


def rect_geojson(r) -> dict:
    """The EditControl's geojson after drawing one rectangle [w, s, e, n]."""
    w, s, e, n = map(float, r)
    ring = [[w, s], [w, n], [e, n], [e, s], [w, s]]
    props = {"type": "rectangle", "_leaflet_id": 101,
             "_bounds": [{"lat": s, "lng": w}, {"lat": n, "lng": e}]}
    return {"type": "FeatureCollection",
            "features": [{"type": "Feature", "properties": props,
                          "geometry": {"type": "Polygon", "coordinates": [ring]}}]}


def csv_data_url(n: int, seed: int = 0) -> str:
    """dcc.Upload contents of a lon,lat CSV of n clustered points in the New York box."""
    x, y = dp.SAMPLES["city_200k"].make(NY, n, seed)
    xy = np.column_stack([x, y]).ravel().tolist()
    text = "lon,lat\n" + ("%.6f,%.6f\n" * n) % tuple(xy)
    return "data:text/csv;base64," + base64.b64encode(text.encode()).decode()


def release_and_query(b: Browser, reps: int, seed0: int) -> tuple[list, list]:
    """Path 1 (Release click, new seed each time) and path 2 (one new drawn rectangle)."""
    rel = []
    for i in range(reps):
        rel.append(b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST, {(ids.SEED, "value"): seed0 + i}))
    rects = dp.random_workload(NY, reps, area_frac=0.01, rng=seed0)
    qry = [b.act(ids.EDIT, "geojson", rect_geojson(r)) for r in rects]
    return rel, qry


def measure(reps: int, n_upload: int) -> list[tuple]:
    """Rows (path, N, target s, [seconds per repetition]) for the table."""
    cold = [json.loads(subprocess.run([sys.executable, __file__, "--cold-worker"], check=True,
                                      capture_output=True, text=True).stdout) for _ in range(reps)]
    client = create_app().server.test_client()
    page_load(client)                                  # the first visit fills the caches
    warm = [page_load(client)[1] for _ in range(reps)]
    b = page_load(client)[0]
    rel, qry = release_and_query(b, reps, 1000)
    n_sample = b.comps[ids.DATASET]["data"]["n"]
    contents = csv_data_url(n_upload)
    up = [b.act(ids.UPLOAD, "contents", contents, {(ids.UPLOAD, "filename"): "points.csv"})
          for _ in range(reps)]
    n_up = b.comps[ids.DATASET]["data"]["n"]
    rel_up, qry_up = release_and_query(b, reps, 2000)
    rows = []
    for n, r, q, target_r, target_q in ((n_sample, rel, qry, 1.0, 0.1), (n_up, rel_up, qry_up, 3.0, 0.3)):
        rows += [("1 release + map: release + draw", n, target_r,
                  [cb(s, RELEASE_CB) + cb(s, MAP_CB) for s in r]),
                 ("    release (its job, polled)", n, None, [cb(s, RELEASE_CB) for s in r]),
                 ("    draw (map)", n, None, [cb(s, MAP_CB) for s in r]),
                 ("    whole chain after Release click", n, None, [s["total"] for s in r]),
                 ("2 drawn rectangle: compare", n, target_q, [cb(s, QUERY_CB) for s in q])]
    rows += [("3 page load, cold server: GET / + layout + deps + page", n_sample, None,
              [c["layout"] for c in cold]),
             (f"3 page load, cold server: + {cold[0]['n']} initial callbacks", n_sample, 3.0,
              [c["full"] for c in cold]),
             ("    of which shown_release (draws nothing)", n_sample, None, [c["release"] for c in cold]),
             ("3 page load, warm server: GET / + layout + deps + page", n_sample, None, [w["layout"] for w in warm]),
             (f"3 page load, warm server: + {warm[0]['n']} initial callbacks", n_sample, 3.0,
              [w["full"] for w in warm]),
             (f"4 upload callback ({len(contents) / 1e6:.0f} MB data URL)", n_up, None,
              [cb(s, LOAD_CB) for s in up]),
             ("    whole chain after upload", n_up, None, [s["total"] for s in up])]
    return rows


def main():
    """Measure every path and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions per path (default 5)")
    ap.add_argument("--n-upload", type=int, default=1_000_000, help="points in the uploaded CSV")
    ap.add_argument("--cold-worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.cold_worker:   # one first visit on a freshly started server, as JSON
        print(json.dumps(page_load(create_app().server.test_client())[1]))
        return
    rows = measure(a.reps, a.n_upload)
    print(f"Server time, real /_dash-update-component payloads through the in-process Flask test "
          f"client; median and max of {a.reps} repetitions, seconds")
    print(f"{'path':<52} {'N':>10} {'target':>7} {'median':>8} {'max':>8}")
    for name, n, target, secs in rows:
        tgt = f"{target:g}" if target else "-"
        print(f"{name:<52} {n:>10,} {tgt:>7} {statistics.median(secs):>8.3f} {max(secs):>8.3f}")
    print("cold server: a fresh process per repetition (caches empty); warm: the same process "
          "again. A page load releases nothing (only a Release click spends). Page-load totals "
          "add up requests the browser partly runs in parallel.")


if __name__ == "__main__":
    main()
