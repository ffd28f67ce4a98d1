"""The page's server alert: failures no panel answers for reach the user in words, never as a
bare HTTP 500 (the Dash app's `on_error`).

A callback that raises a message-bearing error (the server's store or accounts failing, a
refusal, bad parameters) shows its message in a banner at the top of the page and changes
nothing else; any other exception is a bug and still fails loudly.
"""
from __future__ import annotations

from dash import Input, Output, html, set_props

import dp

from . import ids
from server import background

SPOKEN = (LookupError, dp.ParameterError, dp.DataError, dp.BudgetError)


def layout() -> html.Div:
    """The banner, hidden until a failure speaks; its button hides it again."""
    return html.Div(id=ids.SERVER_ALERT, role="alert", className="server-alert error", hidden=True,
                    children=[html.Span(id=ids.SERVER_ALERT_TEXT),
                              html.Button("Dismiss", id=ids.SERVER_ALERT_CLOSE)])


def speak(err: Exception):
    """The Dash app's `on_error`: show a message-bearing error in the banner (the callback's
    outputs are left as they were); re-raise anything else. A background callback's error is
    the one its job raised."""
    err = background.raised(err)
    if not isinstance(err, SPOKEN) or isinstance(err, (KeyError, IndexError)):
        raise err                         # a bug (a KeyError is a LookupError, but no message)
    message = str(err.args[0]) if err.args else "the server could not answer"
    set_props(ids.SERVER_ALERT_TEXT, {"children": f"The server could not do this: {message.rstrip('.')}. "})
    set_props(ids.SERVER_ALERT, {"hidden": False})


def unavailable(message: str) -> html.Div:
    """A page in place of the dashboard when the server cannot read this browser's state."""
    return html.Div(className="page", children=[
        html.H1("Private location statistics"),
        html.Div(role="alert", className="error", children=[
            f"The page cannot open right now: {message}. ",
            "Nothing of yours was changed or charged; reload the page in a while."])])


def register_callbacks(app, config: dict):
    app.clientside_callback("function (n) { return true; }",
                            Output(ids.SERVER_ALERT, "hidden", allow_duplicate=True),
                            Input(ids.SERVER_ALERT_CLOSE, "n_clicks"), prevent_initial_call=True)
