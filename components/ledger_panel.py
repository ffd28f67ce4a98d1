"""Ledger panel: ε per step of the current release and cumulative spend in this session."""
from __future__ import annotations

import math

from dash import Input, Output, State, dash_table, html, no_update

from . import ids, state
from .help import help_box


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("5 · Privacy ledger"),
        help_box("ledger"),
        html.Div(id=ids.LEDGER_GUARANTEE, className="guarantee"),
        dash_table.DataTable(id=ids.LEDGER_TABLE, data=[], columns=[
            {"name": "Step", "id": "step"}, {"name": "ε spent", "id": "epsilon"},
            {"name": "Share", "id": "share"}, {"name": "Sensitivity", "id": "sensitivity"},
            {"name": "Noise", "id": "noise"}, {"name": "Note", "id": "note"}],
            style_cell={"fontSize": "12px", "whiteSpace": "normal", "height": "auto", "textAlign": "left"},
            style_data_conditional=[{"if": {"filter_query": "{noise} = 'none'"},
                                     "backgroundColor": "#fdecea", "color": "#8a1c1c"}]),
        html.Div(id=ids.LEDGER_TOTAL, className="ledger-total"),
    ])


def ledger_rows(rel) -> list[dict]:
    rows = []
    for e in rel.ledger:
        rows.append({
            "step": e.step if e.private else f"{e.step} (NOT private)",
            "epsilon": f"{e.epsilon:.4g}", "share": f"{100 * e.epsilon / rel.epsilon:.0f}%",
            "sensitivity": "∞" if math.isinf(e.sensitivity) else f"{e.sensitivity:.4g}",
            "noise": e.noise + (f" (scale {e.scale:.3g})" if e.scale else ""), "note": e.note})
    return rows


def cumulative_epsilon(spend: list, fingerprint: str) -> float:
    """ε spent on one dataset in this session: sequential composition over distinct releases."""
    return math.fsum(s["epsilon"] for s in spend or [] if s["fingerprint"] == fingerprint)


def register_callbacks(app, config: dict):
    @app.callback(Output(ids.LEDGER_TABLE, "data"), Output(ids.LEDGER_TOTAL, "children"),
                  Output(ids.LEDGER_GUARANTEE, "children"),
                  Input(ids.RELEASE, "data"), Input(ids.SPEND, "data"), State(ids.SESSION, "data"))
    def show(rinfo, spend, sid):
        if not rinfo:
            return no_update, no_update, no_update
        try:
            rel = state.release(sid, rinfo["key"])
        except LookupError as exc:
            return [], str(exc), ""
        fp = state.key_fingerprint(rinfo["key"])
        runs = [s for s in spend or [] if s["fingerprint"] == fp]
        total = html.Div([
            html.Div(f"This release: ε = {rel.ledger.total:.4g} of {rel.epsilon:g} requested."),
            html.Div([html.B(f"Spent on this dataset in this session: ε = {cumulative_epsilon(spend, fp):.4g}"),
                      f" over {len(runs)} release{'s' if len(runs) != 1 else ''}."]),
        ])
        guarantee = [html.B(rel.spec.label + ": "), rel.spec.guarantee,
                     html.Div([html.B("Unit of privacy: "), rel.spec.unit])]
        if rel.reproducible_demo:
            guarantee.append(html.Div("Reproducible demo: a fixed seed made this noise reproducible, "
                                      "so anyone who knows the seed can remove it. NOT differentially "
                                      "private; use fresh randomness for anything you publish.",
                                      className="error"))
        elif not rel.private:
            guarantee.append(html.Div("This output is NOT differentially private.", className="error"))
        return ledger_rows(rel), total, guarantee
