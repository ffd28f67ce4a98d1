"""Homogeneous Tree Framework (paper 003): being written."""
SPECS = ()
