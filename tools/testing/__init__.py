"""What the tests and CI set up before they run: the pinned real wheels, CPython for Windows."""
