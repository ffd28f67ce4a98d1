"""Guided demo: a short tour for non-specialists (the data, what is published, what it costs,
what an attacker learns, the budget) through the panels already on the page, in the spirit of
ViP (Nanayakkara et al., PETS 2022).

Steps that change the app write the existing controls (the ε box and the Release button), so
the real panels update and the dataset's account is charged like any other release. The chart
of what privacy costs uses only what the releases themselves state about their noise (the 95%
interval of a fixed public rectangle), never a true count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import plotly.graph_objects as go
from dash import ALL, ClientsideFunction, Input, Output, State, ctx, dcc, html, no_update

import dp

from . import charts, ids, pages
from server import releases, sessions, state
from .controls import EPS_MAX, EPS_MIN, next_cost
from .help import help_box

MIDDLE_SIDE = 0.2        # the measured box spans the middle fifth of the domain's width and height
CHART_STYLE = {"height": "210px", "width": "330px", "flex": "none"}   # beside the step's text


@dataclass(frozen=True)
class Facts:
    """What the step texts say about this session: the public dataset summary, the release on
    the map, the middle box's noise margin per ε released, the account, and what the next
    step's release will charge."""
    info: dict = field(default_factory=dict)          # the `ids.DATASET` store
    mechanism: str = ""                                # label of the mechanism of the release shown
    released: float | None = None                      # ε of the release on the map
    margins: dict = field(default_factory=dict)       # ε -> (± margin, published answer)
    spent: float = 0.0
    total: float = 10.0
    cost: float | None = None                          # ε the next step's release will charge


def times_likelier(eps: float) -> str:
    """e^ε, the most one person can multiply the chance of any outcome, rounded for reading."""
    x = math.exp(eps)
    if x < 1.1:
        return f"{x:.2f}"
    return f"{x:.1f}" if x < 10 else f"{x:,.0f}"


def likelihood_sentence(eps: float) -> str:
    """ε in everyday terms: how much more likely any conclusion about one person can become."""
    return (f"At ε = {eps:g}, any conclusion about one person becomes at most about "
            f"{times_likelier(eps)} times more likely because that person is in the data.")


def belief_after(eps: float, before: float = 0.5) -> float:
    """The highest an attacker's belief that one person is in the data can rise from `before`
    after seeing an ε-private release: the odds grow by at most e^ε."""
    odds = before / (1 - before) * math.exp(eps)
    return odds / (1 + odds)


def whom(info: dict) -> str:
    """Who 'one person' is for this data: a whole user, or one point when there are no user ids."""
    if info.get("kind") == "regions":
        return "Here one person is one user with their region."
    if info.get("users"):
        return ("Here one person is one user with all their points that are kept (at most k "
                "each, set in step 1, Data).")
    return ("Here the data has no user ids, so 'one person' is one point: someone with many "
            "points in the data is protected less (step 1, Data, says so too).")


def data_text(f: Facts) -> list[str]:
    """Step 1: what the sample is, and that its true counts are private."""
    info = f.info
    if not info:
        return ["No data is loaded yet: pick a built-in sample in step 1 (Data)."]
    regions = info.get("kind") == "regions"
    what = "regions, one per person" if regions else "points"
    unit = ("each region as the area one person moves in" if regions
            else "each point as one person at one place")
    if str(info.get("origin", "")).startswith("sample:"):
        origin = (f"The page is working on the built-in sample “{info['name']}”: {info['n']:,} "
                  f"{what}, made up by a program to look like people in a city, so no real "
                  "person is in it.")
    else:
        origin = f"The page is working on the file you uploaded: {info['n']:,} {what}."
    return [origin,
            f"Think of {unit}. How many people are in each place "
            "is private: only the owner of the data (you, here) sees the true counts, in the "
            "parts of the page marked 'owner only'. Everybody else only ever sees what is "
            "published, which is the next step."]


def published_text(f: Facts) -> list[str]:
    """Step 2: the noisy map is what is published, and the dashed box is public."""
    made = f" It was made by {f.mechanism}, the method picked in step 3 (Release)." if f.mechanism else ""
    return ["The coloured map is what gets published: a count of people for each cell, "
            "with random noise added. Darker means more people. The noise hides whether any one "
            "person is there, while the overall pattern survives." + made,
            "The dashed box is the public domain: the area that is counted. It is chosen from "
            "public knowledge (a city's boundary), never from the data, so showing it gives "
            "nothing away. The owner-only layers (true counts, errors) are for you and are never "
            "part of what is published."]


def margin_sentence(f: Facts, eps: float) -> str:
    """What the release at `eps` says about its noise on the middle box, or that it is missing."""
    if eps not in f.margins:
        return (f"There is no release at ε = {eps:g} yet: step 3 (Release) says why under its "
                "Release button.")
    margin, answer = f.margins[eps]
    share = f" (about {100 * margin / answer:.1f}% of it)" if answer > 0 else ""
    return (f"At ε = {eps:g}, the box in the middle of the map ({100 * MIDDLE_SIDE ** 2:.0f}% of "
            f"its area) has a published count of {answer:,.0f}; 95 times in 100 the noise alone "
            f"moves such a count by at most ±{margin:,.0f} people{share}.")


def cost_text_at_1(f: Facts) -> list[str]:
    """Step 3: what ε means, and the noise of a release at ε = 1."""
    return ["ε (epsilon) is the privacy setting of a release. It limits how much any one person "
            "can change what is published. " + likelihood_sentence(1.0) + " Smaller ε means "
            "more noise and stronger privacy.",
            "Next has just published a new release at ε = 1 (its status line is in step 3, Release). "
            + margin_sentence(f, 1.0),
            "The chart plots that margin; each dot is one release made during this tour."]


def cost_text_at_01(f: Facts) -> list[str]:
    """Step 4: the same box at ε = 0.1, and how much wider its margin is."""
    out = ["Next has just published a new release at ε = 0.1, ten times more private. "
           + margin_sentence(f, 0.1)]
    if 1.0 in f.margins and 0.1 in f.margins:
        ratio = f.margins[0.1][0] / f.margins[1.0][0]
        out.append(f"Ten times less ε made the margin {ratio:.1f} times wider. This is the "
                   "trade-off of every release: stronger privacy costs accuracy. Compare the map "
                   "with the one at ε = 1: the noise shows more.")
    return out


def attacker_text(f: Facts) -> list[str]:
    """Step 5: the e^ε bound in words and numbers for the ε on the map."""
    eps = f.released if f.released is not None else 1.0
    out = ["Suppose an attacker sees everything that is published and wants to know whether one "
           "particular person, say Alice, is in the data. Whatever the published map looks like, "
           "it was at most e^ε times more likely to come out this way with Alice in the data "
           "than without her (e^ε is the number e ≈ 2.718 raised to the power ε), so every "
           "conclusion the attacker draws about her can shift by at most that factor.",
           likelihood_sentence(eps) + f" An attacker who thought it was a coin toss (50%) "
           f"whether Alice is in the data can be at most {100 * belief_after(eps):.0f}% sure "
           "after seeing the map."]
    if eps != 1.0:
        out.append(f"For comparison, at ε = 1 that is {times_likelier(1.0)} times and "
                   f"{100 * belief_after(1.0):.0f}%; at ε = 10, {times_likelier(10.0)} times: "
                   "almost no protection.")
    return out + [whom(f.info)]


def budget_text(f: Facts) -> list[str]:
    """Step 6: every release spends ε from the dataset's account; where to go next."""
    return ["Every release spends its ε from this dataset's account, and the amounts add up: two "
            "noisy maps of the same data can be averaged, so together they reveal more than "
            f"either alone. Step 6 (Ledger, publish, export) keeps the account: ε = {f.spent:.4g} of the "
            f"total {f.total:g} is spent on this dataset so far, the tour's releases included. "
            "Once the total is used up, further releases are refused.",
            "Free of charge: answering rectangles from a release, exports, reloading the page, "
            "and the owner-only evaluation.",
            "Where next: draw rectangles on the map to compare published and true counts (step "
            "4, Explore), compare methods and ε values on your data (step 5, Evaluate and compare), or upload your "
            "own data (step 1, Data)."]


@dataclass(frozen=True)
class Step:
    """One step of the tour: its title, its text, ids of elements in the panels it talks about
    (their cards are outlined, the first one is brought into view), the ε it releases at when
    Next enters it (None: it changes nothing) and whether it shows the margin chart."""
    title: str
    body: Callable[[Facts], list[str]]
    targets: tuple[str, ...]
    release_at: float | None = None
    chart: bool = False


STEPS = (
    Step("The data", data_text, (ids.DATA_SUMMARY,)),
    Step("What is published", published_text, (ids.MAP,)),
    Step("What privacy costs: a release at ε = 1", cost_text_at_1, (ids.MAP, ids.RELEASE_BUTTON),
         1.0, True),
    Step("What privacy costs: a release at ε = 0.1", cost_text_at_01, (ids.MAP, ids.RELEASE_BUTTON),
         0.1, True),
    Step("What an attacker can learn", attacker_text, (ids.EPSILON_VALUE,)),
    Step("The budget", budget_text, (ids.ACCOUNT_SUMMARY,)),
)


def spend_notice(step: int, f: Facts) -> str | None:
    """The warning before a step that releases: what Next will publish and spend, or None."""
    if step + 1 >= len(STEPS) or STEPS[step + 1].release_at is None:
        return None
    eps = STEPS[step + 1].release_at
    cost = f"ε = {f.cost:g}" if f.cost is not None else "its ε"
    return (f"Next publishes the map again at ε = {eps:g}: a new release, which spends {cost} from "
            f"this dataset's privacy budget ({f.total - f.spent:.4g} of {f.total:g} left now).")


def move(button: str, step: int | None) -> int | None:
    """The step a tour button leads to (None: the tour is closed)."""
    if button == ids.TOUR_OPEN:
        return 0
    if button == ids.TOUR_END or step is None:
        return None
    if button == ids.TOUR_BACK:
        return max(step - 1, 0)
    return min(step + 1, len(STEPS) - 1)


def middle_box(domain: dp.Domain) -> dp.Rect:
    """The public rectangle the tour measures: the middle fifth of the domain on each side
    (4% of its area), fixed by the public box alone."""
    w, s, e, n = domain.bounds
    dx, dy = (e - w) * MIDDLE_SIDE / 2, (n - s) * MIDDLE_SIDE / 2
    cx, cy = (w + e) / 2, (s + n) / 2
    return dp.Rect(cx - dx, cy - dy, cx + dx, cy + dy)


def margin_of(rel: dp.Release) -> tuple[float, float]:
    """(half-width of the 95% noise interval, published answer) of the middle box: what the
    release itself states about its noise, never a true count."""
    rect = middle_box(rel.domain)
    lo, hi = rel.interval(rect)
    return (hi - lo) / 2, rel.answer(rect)


def add_margin(store: dict | None, series: list, eps: float, margin: float, answer: float) -> dict:
    """The margins store with one more release: other data, domain or mechanism starts a new
    series, a second release at the same ε replaces the first, and a release without a noise
    interval adds nothing."""
    points = store["points"] if store and store.get("series") == series else []
    points = [p for p in points if p[0] != eps]
    if math.isfinite(margin):
        points.append([eps, margin, answer])
    return {"series": series, "points": sorted(points)}


def margin_figure(points: list) -> go.Figure:
    """The middle box's noise margin against ε (log scale), one dot per release of the tour."""
    eps, margins = [p[0] for p in points], [p[1] for p in points]
    fig = go.Figure(go.Scatter(x=eps, y=margins, mode="lines+markers+text", cliponaxis=False,
                               text=[f"±{m:,.0f}" for m in margins], textposition="middle right",
                               marker={"size": 9, "color": "#1f5fa8"}, line={"color": "#1f5fa8"},
                               hovertemplate="ε = %{x:g}: ± %{y:,.0f} people<extra></extra>"))
    fig.update_layout(template="plotly_white", margin={"l": 60, "r": 40, "t": 30, "b": 40},
                      title={"text": "Noise margin of the middle box (95% of the time)",
                             "font": {"size": 13}, "x": 0},
                      xaxis={"title": "ε (smaller: more private)", "type": "log",
                             "range": [math.log10(EPS_MIN), math.log10(EPS_MAX)],
                             "tickvals": [0.01, 0.1, 1, 10], "ticktext": ["0.01", "0.1", "1", "10"]},
                      yaxis={"title": "± people", "rangemode": "tozero"})
    return fig


def step_view(step: int, f: Facts) -> list:
    """The step's paragraphs, and the spending warning when Next will release."""
    notice = spend_notice(step, f)
    return [html.P(t) for t in STEPS[step].body(f)] + \
        ([html.P(notice, className="warning tour-notice")] if notice else [])


def header_button() -> html.Button:
    """The page header's button that opens the tour at its first step."""
    return html.Button("Guided demo", id=ids.TOUR_OPEN, n_clicks=0, className="tour-open",
                       title="A short walk through the page: the data, what is published, "
                             "what it costs")


def layout(config: dict) -> html.Div:
    """The tour card at the top of the main column, hidden until the header's button opens it."""
    return html.Div(id=ids.TOUR_CARD, className="card tour", hidden=True, role="region",
                    **{"aria-label": "Guided demo"}, children=[
        html.Div(className="tour-head", children=[
            html.H3(id=ids.TOUR_TITLE), html.Span(id=ids.TOUR_COUNTER, className="hint")]),
        help_box("tour"),
        html.Div(className="tour-content", children=[
            html.Div(id=ids.TOUR_BODY, className="tour-body"),
            charts.chart_place(ids.TOUR_CHART)]),
        html.Div(className="tour-nav", children=[
            html.Button("Back", id=ids.TOUR_BACK, n_clicks=0),
            html.Button("Next", id=ids.TOUR_NEXT, n_clicks=0, className="primary"),
            html.Button("End tour", id=ids.TOUR_END, n_clicks=0)]),
        dcc.Store(id=ids.TOUR_STEP), dcc.Store(id=ids.TOUR_MARGINS),
        dcc.Store(id=ids.TOUR_TARGETS, data=[list(s.targets) for s in STEPS]),
    ])


def register_callbacks(app, config: dict):
    app.callback(Output(ids.TOUR_STEP, "data"),
                 Output(ids.EPSILON_VALUE, "value", allow_duplicate=True),
                 Output(ids.RELEASE_BUTTON, "n_clicks", allow_duplicate=True),
                 Input(ids.TOUR_OPEN, "n_clicks"), Input(ids.TOUR_BACK, "n_clicks"),
                 Input(ids.TOUR_NEXT, "n_clicks"), Input(ids.TOUR_END, "n_clicks"),
                 State(ids.TOUR_STEP, "data"), State(ids.RELEASE_BUTTON, "n_clicks"),
                 prevent_initial_call=True)(navigate)

    app.callback(Output(ids.TOUR_MARGINS, "data"), Input(ids.RELEASE, "data"),
                 State(ids.TOUR_STEP, "data"), State(ids.TOUR_MARGINS, "data"),
                 prevent_initial_call=True)(record_margin)

    app.callback(Output(ids.TOUR_TITLE, "children"), Output(ids.TOUR_COUNTER, "children"),
                 Output(ids.TOUR_BODY, "children"), Output(charts.place_id(ids.TOUR_CHART), "children"),
                 Output(ids.TOUR_BACK, "disabled"),
                 Output(ids.TOUR_NEXT, "disabled"), Output(ids.TOUR_NEXT, "children"),
                 Input(ids.TOUR_STEP, "data"), Input(ids.TOUR_MARGINS, "data"),
                 Input(ids.RELEASE, "data"), Input(ids.DATASET, "data"), Input(ids.ACCOUNT_TICK, "data"),
                 State(ids.MECHANISM, "value"), State({"type": ids.PARAM, "name": ALL}, "value"),
                 State({"type": ids.PARAM, "name": ALL}, "id"), State(ids.DOMAIN, "data"))(show_step)

    app.clientside_callback(ClientsideFunction("tour", "focus"), Output(ids.TOUR_CARD, "hidden"),
                            Input(ids.TOUR_STEP, "data"), State(ids.TOUR_TARGETS, "data"))


def show_step(step, store, rinfo, info, _tick, name, pvals, pids, domain_info):
    """Render the step with what this session's releases and account say."""
    if step is None:
        return (no_update,) * 7
    upcoming = STEPS[step + 1].release_at if step + 1 < len(STEPS) else None
    acc = state.account(sessions.session_id(), info["fingerprint"]) if info else None
    points = (store or {}).get("points", [])
    f = Facts(info=info or {}, mechanism=(rinfo or {}).get("label", ""),
              released=(rinfo or {}).get("epsilon"),
              margins={p[0]: (p[1], p[2]) for p in points},
              spent=acc.spent if acc else 0.0, total=acc.total if acc else pages.settings()["default_budget"],
              cost=next_cost(upcoming, name, pvals, pids, domain_info) if upcoming else None)
    chart = STEPS[step].chart and bool(points)
    return (STEPS[step].title, f"Step {step + 1} of {len(STEPS)}", step_view(step, f),
            charts.chart(ids.TOUR_CHART, margin_figure(points), config={"displayModeBar": False},
                         style=CHART_STYLE) if chart else [],
            step == 0, step == len(STEPS) - 1,
            f"Next: release at ε = {upcoming:g} (spends ε)" if upcoming else "Next")


def navigate(_open, _back, _next, _end, step, clicks):
    """Go to the step a button leads to; Next into a releasing step sets ε and presses
    Release, so the mechanism panel releases and the ledger charges it."""
    new = move(ctx.triggered_id, step)
    if ctx.triggered_id == ids.TOUR_NEXT and new != step and STEPS[new].release_at is not None:
        return new, STEPS[new].release_at, (clicks or 0) + 1
    return new, no_update, no_update


def record_margin(rinfo, step, store):
    """While the tour is open, keep each release's noise margin of the middle box."""
    if step is None or not rinfo:
        return no_update
    try:
        rel = releases.release(sessions.session_id(), rinfo["key"])
    except LookupError:
        return no_update
    series = [releases.key_fingerprint(rinfo["key"]), rinfo["mechanism"], list(rel.domain.bounds)]
    return add_margin(store, series, rinfo["epsilon"], *margin_of(rel))
