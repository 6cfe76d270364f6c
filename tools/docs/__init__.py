"""Generators of the docs made from the code: the usage page, the front page, the package map."""
