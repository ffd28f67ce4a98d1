"""Every server-side callback of the app is a module-level function of its panel (issue 42), so
a test imports and calls it without Dash; Dash's own (the pages' router, the cancel callbacks
of background callbacks) and the browser-side ones are not the app's."""
from __future__ import annotations

import sys

from app import create_app
from components import ids


def test_every_callback_is_a_function_a_test_can_import():
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"})
    ours = []
    for output, cb in app.callback_map.items():
        fn = cb.get("callback")
        if fn is None:                         # a clientside callback: it runs in the browser
            continue
        fn = getattr(fn, "__wrapped__", fn)
        if fn.__module__.startswith("dash."):  # Dash's router and cancel callbacks
            continue
        assert "<locals>" not in fn.__qualname__, f"{output}: {fn.__qualname__} is a closure"
        assert getattr(sys.modules[fn.__module__], fn.__name__) is fn, output
        ours.append(fn)
    assert len(ours) >= 60 and len(set(ours)) == len(ours)     # each registered once


def test_what_the_page_shows_of_releases_has_one_writer():
    """The release store and its status line are written by one callback (`show_release`): a
    click's result, new data, a new box and a page load then reach them in the order Dash asks,
    the newest call winning. Written by two, an answer computed before a click's release could
    land after it and hide it ("Nothing released" over a release charged and recorded)."""
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"})
    outputs = [out.partition("@")[0] for key in app.callback_map for out in key.strip(".").split("...")]
    for prop in (f"{ids.RELEASE}.data", f"{ids.RELEASE_STATUS}.children"):
        assert outputs.count(prop) == 1, prop
