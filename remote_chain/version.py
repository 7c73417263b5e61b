"""The package's version, in a module of its own so that the library can read it without
importing the package's public API (``remote_chain/__init__.py``)."""

__version__ = "0.1.0"
