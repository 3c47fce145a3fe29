"""Helpers the tests share: scripted models, loopback servers, runners. Not tests themselves.

A test imports what it needs from here (``from tests.support import scripted``); fixtures
live in the ``conftest.py`` of the folder whose tests use them.
"""
