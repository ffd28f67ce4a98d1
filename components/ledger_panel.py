"""Ledger panel: ε per step of the current release, and the dataset's budget account on the server."""
from __future__ import annotations

import math
import time

from dash import ALL, Input, Output, State, dash_table, dcc, html, no_update

import dp

from . import ids
from server import releases, sessions, state
from .controls import next_cost
from .help import help_box

TABLE_STYLE = {"fontSize": "12px", "whiteSpace": "normal", "height": "auto", "textAlign": "left"}
# wrapped text columns get room to read (a Note column two characters wide was unreadable)
WIDE_COLUMNS = [{"if": {"column_id": c}, "minWidth": w} for c, w in
                (("step", "150px"), ("note", "170px"), ("what", "150px"), ("noise", "120px"))]


def layout(config: dict) -> html.Div:
    return html.Div(className="card ledger", children=[
        html.H3("Privacy ledger"),
        help_box("ledger"),
        html.Div(id=ids.ACCOUNT_SUMMARY, className="account"),
        html.Div(id=ids.LEDGER_GUARANTEE, className="guarantee"),
        html.H4("This release, step by step"),
        dash_table.DataTable(id=ids.LEDGER_TABLE, data=[], columns=[
            {"name": "Step", "id": "step"}, {"name": "ε spent", "id": "epsilon"},
            {"name": "Share", "id": "share"}, {"name": "Sensitivity", "id": "sensitivity"},
            {"name": "Noise", "id": "noise"}, {"name": "Note", "id": "note"}],
            style_table={"overflowX": "auto"}, style_cell=TABLE_STYLE, style_cell_conditional=WIDE_COLUMNS,
            style_data_conditional=[{"if": {"filter_query": "{noise} = 'none'"},
                                     "backgroundColor": "#fdecea", "color": "#8a1c1c"}]),
        html.Div(id=ids.LEDGER_TOTAL, className="ledger-total"),
        html.H4("Everything charged to this dataset (this browser)"),
        dash_table.DataTable(id=ids.ACCOUNT_TABLE, data=[], page_size=8, columns=[
            {"name": "#", "id": "n"}, {"name": "What", "id": "what"}, {"name": "ε", "id": "epsilon"},
            {"name": "When", "id": "when"}, {"name": "Note", "id": "note"}],
            style_table={"overflowX": "auto"}, style_cell=TABLE_STYLE, style_cell_conditional=WIDE_COLUMNS),
        html.Div(className="raise-row", children=[
            html.Label("Total budget ε for this dataset", htmlFor=ids.ACCOUNT_RAISE_VALUE),
            dcc.Input(id=ids.ACCOUNT_RAISE_VALUE, type="number", min=0, step="any", debounce=True),
            html.Button("Raise total…", id=ids.ACCOUNT_RAISE, n_clicks=0)]),
        dcc.ConfirmDialog(id=ids.ACCOUNT_CONFIRM),
        html.Div(id=ids.ACCOUNT_MESSAGE, role="status"),
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


def account_rows(acc: dp.Accountant) -> list[dict]:
    """One row per charge, newest first: what was run, its ε (or ρ and its ε at δ), and when."""
    rows = []
    for i, c in enumerate(acc.charges, 1):
        if c.rho:
            cost = f"ρ = {c.rho:.3g} (zCDP)"
        else:
            cost = f"{c.epsilon:.4g}"
        note = c.note if c.private else f"{c.note}; NOT private".lstrip("; ")
        rows.append({"n": i, "what": c.label, "epsilon": cost, "note": note,
                     "when": time.strftime("%Y-%m-%d %H:%M", time.localtime(c.at))})
    return rows[::-1]


def budget_bar(spent: float, total: float) -> html.Div:
    """Spent / total as a bar, red once more than 80% is gone."""
    frac = min(spent / total, 1.0)
    return html.Div(className="budget-bar", title=f"{100 * frac:.0f}% of the budget spent", children=[
        html.Div(className="budget-fill" + (" low" if frac > 0.8 else ""),
                 style={"width": f"{100 * frac:.1f}%"})])


def account_summary(acc: dp.Accountant, next_epsilon: float | None) -> list:
    """Both lines of the account with bars, what the next release costs, the rule, what is free."""
    out = [html.Div([html.B(f"Spent ε = {acc.spent:.4g} of {acc.total:g}"),
                     f" on releases of this dataset ({acc.remaining:.4g} left)"], className="account-spent"),
           budget_bar(acc.spent, acc.total)]
    if next_epsilon is not None:
        if acc.spent + next_epsilon > acc.total * (1 + dp.accountant.TOLERANCE):
            out.append(html.Div(f"The next release at ε = {next_epsilon:g} would exceed the total "
                                "and will be refused.", className="warning"))
        else:
            out.append(html.Div(f"Next release: ε = {next_epsilon:.4g}, leaving "
                                f"{acc.total - acc.spent - next_epsilon:.4g}.", className="hint"))
    if acc.spent_rho:
        out += [html.Div([html.B(f"Interactive sessions: ε = {acc.session_spent:.4g} of {acc.total:g}"),
                          f" at δ = {acc.delta:g}, for a user's location (ρ = {acc.spent_rho:.3g} "
                          "zCDP in all)"], className="account-spent"),
                budget_bar(acc.session_spent, acc.total)]
    if not acc.private:
        out.append(html.Div("A reproducible demo or a data-fitted box was released on this dataset: "
                            "its guarantee no longer holds.", className="error"))
    out.append(html.Details(className="help", children=[html.Summary("How the budget is counted"), html.P([
                            "Rule: ", dp.accountant.COMPOSITION_RULE, ". Charged: every release and "
                         "every interactive session. Not charged: answering rectangles from a "
                         "release, exports, reloading the page (your last release is shown "
                         "again), and evaluation runs, which show you, the owner, errors against "
                         "your own data and publish nothing. Publishing a release is free too. The "
                         "account of data opened from the server's folder belongs to the server: "
                         "one budget, spent by its owners only, whichever browser. Samples and "
                         "uploads have an account of this browser's: clearing its cookies starts "
                         "a new one."])]))
    return out


def register_callbacks(app, config: dict):
    app.callback(Output(ids.LEDGER_TABLE, "data"), Output(ids.LEDGER_TOTAL, "children"),
                 Output(ids.LEDGER_GUARANTEE, "children"), Input(ids.RELEASE, "data"))(show)

    app.callback(Output(ids.ACCOUNT_SUMMARY, "children"), Output(ids.ACCOUNT_TABLE, "data"),
                 Output(ids.ACCOUNT_RAISE_VALUE, "value"),
                 Input(ids.DATASET, "data"), Input(ids.RELEASE, "data"), Input(ids.ACCOUNT_TICK, "data"),
                 Input(ids.EPSILON_VALUE, "value"), Input(ids.MECHANISM, "value"),
                 Input({"type": ids.PARAM, "name": ALL}, "value"), Input(ids.DOMAIN, "data"),
                 State({"type": ids.PARAM, "name": ALL}, "id"))(show_account)

    app.callback(Output(ids.ACCOUNT_CONFIRM, "displayed"), Output(ids.ACCOUNT_CONFIRM, "message"),
                 Output(ids.ACCOUNT_MESSAGE, "children"),
                 Input(ids.ACCOUNT_RAISE, "n_clicks"), State(ids.ACCOUNT_RAISE_VALUE, "value"),
                 State(ids.DATASET, "data"), prevent_initial_call=True)(ask_raise)

    app.callback(Output(ids.ACCOUNT_TICK, "data"), Output(ids.ACCOUNT_MESSAGE, "children",
                                                          allow_duplicate=True),
                 Input(ids.ACCOUNT_CONFIRM, "submit_n_clicks"), State(ids.ACCOUNT_RAISE_VALUE, "value"),
                 State(ids.DATASET, "data"), prevent_initial_call=True)(do_raise)


def show(rinfo):
    """The release's ledger (each draw and its ε), its total against the ε asked, and its
    guarantee and unit of privacy in words."""
    if not rinfo:
        return [], "No release yet.", ""
    try:
        rel = releases.release(sessions.session_id(), rinfo["key"])
    except LookupError as exc:
        return [], str(exc), ""
    total = f"This release: ε = {rel.ledger.total:.4g} of {rel.epsilon:g} requested."
    guarantee = [html.B(rel.spec.label + ": "), rel.spec.guarantee,
                 html.Div([html.B("Unit of privacy: "), rel.privacy_level])]
    if rel.reproducible_demo:
        guarantee.append(html.Div("Reproducible demo: a fixed seed made this noise reproducible, "
                                  "so anyone who knows the seed can remove it. NOT differentially "
                                  "private; use fresh randomness for anything you publish.",
                                  className="error"))
    elif not rel.private:
        guarantee.append(html.Div("This output is NOT differentially private.", className="error"))
    return ledger_rows(rel), total, guarantee


def show_account(info, _rinfo, _tick, eps_v, name, pvals, domain_info, pids):
    """The dataset's account: spent and left, what the next release would cost, its charges,
    and the raise box at the total."""
    if not info:
        return no_update, no_update, no_update
    acc = state.account(sessions.session_id(), info["fingerprint"])
    return account_summary(acc, next_cost(eps_v, name, pvals, pids, domain_info)), \
        account_rows(acc), acc.total


def ask_raise(_, value, info):
    """Raise-budget click: ask to confirm (raising weakens the guarantee for everyone in the
    data), or say why not."""
    acc = state.account(sessions.session_id(), info["fingerprint"])
    if value is None or not value > acc.total:
        return False, no_update, html.Div(f"Type a total above the current {acc.total:g} first: "
                                          "the budget can only be raised.", className="error")
    return True, (f"Raise this dataset's total budget from ε = {acc.total:g} to {value:g}? Every "
                  "raise weakens the guarantee for everyone in the data, and cannot be undone."), ""


def do_raise(_, value, info):
    """Confirmed raise: write the new total to the account (a tick tells the account panel), or
    say why not."""
    try:
        state.charge(sessions.session_id(), info["fingerprint"],
                     lambda acc: acc.raise_total(value, confirm=True))
    except (dp.ParameterError, LookupError) as exc:
        return no_update, html.Div(str(exc), className="error")
    return time.time(), html.Div(f"Total budget raised to ε = {value:g}.", className="warning")
