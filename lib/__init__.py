"""Scaling, Reproduced: the shared library."""
