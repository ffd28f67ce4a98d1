"""Shifted grids under delta-neighbourhood privacy (paper 001): being written."""
SPECS = ()
