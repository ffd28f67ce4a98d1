"""Dashboard panels: each module has layout() and register_callbacks(app); no maths here."""
