"""Execution-provider packs (a vendor's plugin EP as a folder beside the exe): their catalogue
under manifests/eps/, and the choice of packs for a build."""
