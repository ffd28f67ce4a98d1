"""Exceptions and warnings shared by every layer of `dp`."""


class DataError(ValueError):
    """Uploaded data could not be used; the message says what was wrong and what was expected."""


class ParameterError(ValueError):
    """A mechanism or domain parameter is impossible (e.g. epsilon <= 0, split not summing to 1)."""


class BudgetError(RuntimeError):
    """A release's ledger does not add up to the epsilon the user asked for."""


class PrivacyLeakWarning(UserWarning):
    """A public parameter was derived from the private data, so the end-to-end guarantee is void."""
