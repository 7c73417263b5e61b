"""What each command does once it runs, imported by its declaration (``cli/<group>.py``) only
then: the CLI's dispatch, the one place the package imports lazily (``cli/__init__``)."""
