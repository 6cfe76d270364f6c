"""The DLL closure of an app: the plan every command renders, its resolution from import tables and
run-time rules, the GPU and VC++ runtime fit, and the lock that records it (its content, and the
file it is written to)."""
