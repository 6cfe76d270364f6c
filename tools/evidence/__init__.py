"""The GPU evidence pipeline behind manifests/evidence/: probe models, GPU runs, tables, proofs."""
