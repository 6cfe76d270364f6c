"""What a build targets: the profiles (an ORT release and flavour, its pinned artifacts, its run-
time loads), their names and values, the Windows system policy, the manifests that hold them,
and where the package data lives."""
