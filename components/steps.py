"""The side panel of steps beside the map, in the order of the work: data, plan, release,
explore, evaluate and compare, ledger and export. Each step is a <details> element, so it opens
from the keyboard (Tab to its title, Enter or Space); `assets/steps.js` keeps one open at a time
and tells the map when the panel's width changes."""
from __future__ import annotations

from dataclasses import dataclass

from dash import html


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    hint: str            # one line under the title: what the step is for
    wide: bool = False   # charts and side-by-side maps: the panel widens while it is open
    owner: bool = False  # holds controls or numbers only the data owner sees


STEPS = (
    Step("data", "1 · Data", "a sample, your upload or a server file; the public box"),
    Step("plan", "2 · Plan ε (free)", "the ε each mechanism needs for your accuracy, from a synthetic twin"),
    Step("release", "3 · Release", "mechanism, ε and its split; the one button that spends"),
    Step("explore", "4 · Explore", "rectangles, districts and hexagons: private answers and their error",
         owner=True),
    Step("evaluate", "5 · Evaluate and compare", "two mechanisms side by side; error over many rectangles",
         wide=True, owner=True),
    Step("publish", "6 · Ledger, publish, export", "what was spent; downloads and the public page"),
)
OPEN_AT_START = "data"


def step(s: Step, children: list, is_open: bool = False, after: Step | None = None) -> html.Details:
    """One step: its numbered title (with an "owner" mark when it holds owner-only content),
    the panels it holds, and a button that opens the step `after` it."""
    mark = [html.Span("owner", className="owner-mark",
                      title="holds true counts or controls only the data owner sees")] if s.owner else []
    return html.Details(id=f"step-{s.key}", className="step wide" if s.wide else "step", open=is_open,
                        children=[
        html.Summary(className="step-title", children=[
            html.Span(s.title, className="step-name"), *mark,
            html.Span(s.hint, className="step-hint")]),
        html.Div(className="step-body", children=[*children, *next_button(after)])])


def next_button(after: Step | None) -> list:
    if after is None:
        return []
    return [html.Button(f"Next: {after.title} →", className="step-next",
                        **{"data-opens-step": f"step-{after.key}"})]


def side_panel(panels: dict, start: str = OPEN_AT_START) -> html.Nav:
    """The steps in order; `panels` maps a step's key to the panel layouts it holds."""
    return html.Nav(className="steps", **{"aria-label": "Steps"}, children=[
        step(s, panels[s.key], is_open=s.key == start, after=after)
        for s, after in zip(STEPS, (*STEPS[1:], None))])
