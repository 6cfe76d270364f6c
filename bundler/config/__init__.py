"""The configuration of a command: the options, their values and origins, the validation step, the
settings read from the environment, and the cache's location."""
