"""The ``userdp`` command line (entry point :func:`main`)."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
