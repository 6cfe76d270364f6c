"""Regenerators and proofs of the data in manifests/: profiles, EP packs, the system DLL list."""
