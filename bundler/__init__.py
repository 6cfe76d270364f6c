"""bundle: ship ONNX Runtime 1.19.2 GPU apps for Windows with every DLL they need."""

__version__ = "0.1.0"
# The distribution this package belongs to. `bundler` is also the import name of an unrelated
# PyPI project: cli.py refuses to run when the `bundler` it imports does not carry this marker.
DISTRIBUTION = "ort-bundle"
