"""bundle: ship ONNX Runtime 1.19.2 GPU apps for Windows with every DLL they need."""

__version__ = "0.1.0"
