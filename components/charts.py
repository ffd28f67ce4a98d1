"""Charts drawn only when shown: a chart's place in the layout is an empty Div until a callback
fills it with its `dcc.Graph`. A `dcc.Graph` in the layout, even hidden, makes every page load
fetch and run plotly.js (4.8 MB): 1-2 s before the page answers in headless Chromium here; so a
page without a chart on screen loads none."""
from __future__ import annotations

from dash import dcc, html


def place_id(graph_id: str) -> str:
    """The id of the Div that holds the chart `graph_id` once it is drawn."""
    return f"{graph_id}-place"


def chart_place(graph_id: str) -> html.Div:
    """Where the chart `graph_id` goes: empty until `chart` fills it."""
    return html.Div(id=place_id(graph_id))


def chart(graph_id: str, figure, **props) -> dcc.Graph:
    """What fills a chart's place: its dcc.Graph showing `figure` (an empty place is [])."""
    return dcc.Graph(id=graph_id, figure=figure, **props)
