"""The performance benchmarks of `bundle` on real data; each runs as `python -m benchmarks.NAME`."""
