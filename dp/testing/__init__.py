"""Test instrumentation, not used by any release: the evidence the privacy tests gather.

`audit` is the stochastic privacy tester (and the exact PrivTree path loss, the floating-point
check); `draw_audit` records every noise draw against the claim and the charge it was made
under. Neither is imported by `import dp`; the test suite and anyone checking a new mechanism
import them as `from dp.testing import audit, draw_audit`.
"""
