"""`bundle measure`: the app's own measurement. Each of its ONNX models runs with ONNX Runtime
in a fresh child process on the machine at hand (child.py, standard library plus onnxruntime
and numpy only), and the parent (run.py) writes the app evidence file that `bundle build
--evidence` prunes from (bundler.pruning.app_evidence reads it). names.py maps the libraries a child
loaded to their Windows DLL names."""

DEFAULT_TIMEOUT = 300.0  # seconds per model: a first CUDA run loads and compiles kernels
