"""Model-aware pruning: the GPU evidence of which libraries an operator loads, an app's own
evidence, ONNX model reading, and the decision what to leave out."""
