"""The server side of the dashboard, beside the panels in `components`: the shared store
(`store`), each browser's workspace and its release records (`workspace`), datasets, releases
and their keys (`state`), budget accounts (`accounts`), evaluation jobs (`jobs`), the pool that
builds releases (`heavy`) and memory housekeeping (`memory`). Panels read and change state
through `state` and `workspace`; nothing here builds a layout."""
