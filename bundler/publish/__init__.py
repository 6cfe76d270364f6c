"""Publishing a built bundle: checksums, provenance, SBOMs and winget manifests for the files a
release uploads, and the user's check of a download against them (docs/publishing.md)."""
