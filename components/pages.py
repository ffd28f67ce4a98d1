"""The app's pages, one Dash app with Dash Pages: the dashboard at /, the gallery of published
releases at /r/, one published release at /r/<id>, and a page for any other address.

Dash keeps its pages in one registry per process, so a page's layout reads the settings of the
app serving the request (`settings`), never those of the app that registered the pages last
(tests build many apps in one process).
"""
from __future__ import annotations

import dash
import flask
from dash import html

from . import public_page

EXTENSION = "dp_page_settings"


def install(app: dash.Dash, config: dict, dashboard, title: str) -> None:
    """Keep `config` on the app's Flask server, register the pages (`dashboard`: the layout of /)
    once per process (an app may be made while another serves a request, where Dash refuses to
    register) and make the app's layout Dash's page container."""
    app.server.extensions[EXTENSION] = config
    if "dashboard" not in dash.page_registry:
        register(dashboard, title)
    app.layout = dash.page_container


def register(dashboard, title: str) -> None:
    """The pages, in Dash's registry of this process; their layouts read the serving app's
    settings."""
    dash.register_page("dashboard", path="/", layout=dashboard, title=title, name="Dashboard")
    dash.register_page("published", path=public_page.BASE, layout=public_page.gallery_page,
                       title=public_page.TITLE, name="Published releases")
    dash.register_page("published_release", path_template=public_page.BASE + "<pid>",
                       layout=published_release, title=public_page.TITLE, name="A published release")
    dash.register_page("not_found_404", layout=not_found, title=title)


def settings() -> dict:
    """The settings of the app serving this request (tiles, upload limit, workers, …)."""
    return flask.current_app.extensions[EXTENSION]


def published_release(pid: str = "", **_query):
    """/r/<pid>: the release published under `pid` (Dash passes the address's parts)."""
    return public_page.release_page(pid, settings())


def not_found(**_query):
    """Any address that is not a page: say so, and where the pages are."""
    return public_page.shell([
        html.H1("No page at this address"),
        html.P(["The dashboard is at ", html.A("/", href="/"), " and the published releases at ",
                html.A(public_page.BASE, href=public_page.BASE), "."])])
