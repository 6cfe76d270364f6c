"""Reading Windows binaries: PE import tables and their defects, CUDA fat binaries, Authenticode
signatures."""
