"""Files on disk: safe writes and copies or hard links, Windows clones, locks between processes,
and digests."""
