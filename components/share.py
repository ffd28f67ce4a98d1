"""Shareable settings: a link whose query string carries the mechanism, ε, split, domain and
parameters (never data, never a seed), and opening such a link applies them.

    ?mechanism=privtree&epsilon=0.5&split=0.5,0.5&domain=San+Francisco&theta=0
    ?mechanism=ug&epsilon=1&box=-122.5,37.7,-122.3,37.8          (a typed box)
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

from dash import ALL, Input, Output, State, html
from dash.exceptions import PreventUpdate

import dp

from . import ids
from .controls import CUSTOM, DOMAINS, domain_from_store, epsilon_value, read_params, read_split

SIDES = ("west", "south", "east", "north")


@dataclass(frozen=True)
class Settings:
    """What a link sets: a registered private mechanism with its split and parameters, ε, and a
    public domain (`preset` is its name in DOMAINS, or CUSTOM for a typed box)."""
    mechanism: str
    epsilon: float
    split: tuple
    params: dict
    domain: dp.Domain
    preset: str

    def matches(self, name, epsilon, split, params, domain) -> bool:
        """Whether a release was made with these settings (the split up to rounding)."""
        return (name, epsilon, params, domain) == (self.mechanism, self.epsilon, self.params,
                                                   self.domain) \
            and len(split) == len(self.split) and all(abs(a - b) < 1e-9 for a, b in zip(split, self.split))


def to_query(name: str, epsilon: float, split, params: dict, domain: dp.Domain) -> str:
    """The query string for these settings ('?…'); a domain that is not a listed box goes as
    its four sides, and one fitted to the data is refused (its sides are the data's extremes)."""
    if domain.leaky:
        raise dp.ParameterError("the domain was fitted to the data, so a link would publish the "
                                "data's extreme coordinates; choose a listed or typed box first")
    q = {"mechanism": name, "epsilon": f"{epsilon:g}", "split": ",".join(f"{f:.4g}" for f in split)}
    if DOMAINS.get(domain.name) == domain:
        q["domain"] = domain.name
    else:
        q["box"] = ",".join(f"{v:.6g}" for v in domain.bounds)
    for k, v in params.items():
        q[k] = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return "?" + urlencode(q)


def from_query(search: str | None) -> Settings | None:
    """The settings a link carries, None without any; ParameterError saying what is wrong."""
    q = {k: v[-1] for k, v in parse_qs((search or "").lstrip("?")).items()}
    if "mechanism" not in q:
        return None
    name = q.pop("mechanism")
    spec = dp.mechanisms(private_only=True).get(name)
    if spec is None:
        raise dp.ParameterError(f"the link names an unknown mechanism {name!r}")
    epsilon = epsilon_value(q.pop("epsilon", 1.0))
    split = _split(spec, q.pop("split", None))
    domain, preset = _domain(q.pop("domain", None), q.pop("box", None))
    return Settings(name, epsilon, split, spec.resolve_params(q), domain, preset)


def valid_link(search: str | None) -> Settings | None:
    """The link's settings, or None without a link or for a broken one (`say_link` reports it)."""
    try:
        return from_query(search)
    except dp.ParameterError:
        return None


def _split(spec: dp.MechanismSpec, text: str | None) -> tuple:
    """The link's split as fractions of ε, one per budget part (the default without one)."""
    if text is None:
        return tuple(spec.default_split)
    try:
        parts = [float(v) for v in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) != len(spec.budget_parts) or min(parts) <= 0:
        raise dp.ParameterError(f"the link's split should be {len(spec.budget_parts)} positive "
                                f"shares ({', '.join(spec.budget_parts)}), got {text!r}")
    return tuple(p / sum(parts) for p in parts)


def _domain(name: str | None, box: str | None) -> tuple[dp.Domain, str]:
    """(domain, preset value) from a listed box's name or four typed sides."""
    if name is not None:
        if name not in DOMAINS:
            raise dp.ParameterError(f"the link names an unknown domain {name!r}")
        return DOMAINS[name], name
    try:
        sides = [float(v) for v in (box or "").split(",")]
    except ValueError:
        sides = []
    if len(sides) != 4:
        raise dp.ParameterError("the link needs a domain: a listed box or four sides "
                                "'west,south,east,north'")
    return dp.Domain(*sides, name="custom box"), CUSTOM


def register_callbacks(app, config: dict):
    app.callback(Output(ids.MECHANISM, "value", allow_duplicate=True),
                 Output(ids.EPSILON_VALUE, "value", allow_duplicate=True),
                 Output(ids.DOMAIN_PRESET, "value", allow_duplicate=True),
                 Output({"type": ids.DOMAIN_BOX, "side": ALL}, "value", allow_duplicate=True),
                 Output(ids.SEED_MODE, "value", allow_duplicate=True),
                 Input(ids.URL, "search"), prevent_initial_call="initial_duplicate")(apply_link)

    app.callback(Output(ids.SHARE_NOTE, "children"), Input(ids.URL, "search"))(say_link)

    app.callback(Output(ids.SHARE_LINK, "value"),
                 Input(ids.SHARE_BUTTON, "n_clicks"),
                 State(ids.URL, "href"), State(ids.MECHANISM, "value"), State(ids.EPSILON_VALUE, "value"),
                 State({"type": ids.SPLIT, "part": ALL}, "value"),
                 State({"type": ids.PARAM, "name": ALL}, "value"),
                 State({"type": ids.PARAM, "name": ALL}, "id"), State(ids.DOMAIN, "data"),
                 prevent_initial_call=True)(make_link)


def apply_link(search):
    """Fill in the controls a link carries, with fresh randomness (a link carries no seed);
    nothing is released until Release is pressed."""
    s = valid_link(search)
    if s is None:
        raise PreventUpdate
    box = list(s.domain.bounds) if s.preset == CUSTOM else [None] * len(SIDES)
    return s.mechanism, s.epsilon, s.preset, box, "fresh"


def say_link(search):
    """Whether the link's settings were applied, and if not, why."""
    try:
        s = from_query(search)
    except dp.ParameterError as exc:
        return html.Div(["This link's settings were not applied: ", str(exc)], className="error")
    if s is None:
        return ""
    return html.Div(f"Settings from the link: {dp.mechanisms()[s.mechanism].label}, "
                    f"ε = {s.epsilon:g}, domain {s.domain.name}.", className="ok")


def make_link(_, href, name, eps, weights, pvals, pids, domain_info):
    """A link to the panel's current settings (checked as a release would check them)."""
    spec = dp.mechanisms().get(name)
    if spec is None:                     # the picker empties while it switches to new data
        return "No link: pick a mechanism in step 3 (Release) first"
    try:
        query = to_query(name, epsilon_value(eps), read_split(spec, weights),
                         spec.resolve_params(read_params(spec, pvals, pids)),
                         domain_from_store(domain_info))
    except (dp.ParameterError, LookupError) as exc:
        return f"No link: {exc}"
    return (href or "").split("?")[0] + query
