"""Verification of one host: the checks' registry and diagnosis (checks), the checks by what they look at
(checks_node, checks_runtime, checks_cluster, checks_control_plane, checks_dra, checks_smoke, checks_run) and the
host's verdict and report row (verify). Imports the shared ground and every concern it checks; only the controller side
imports it (the gpu_node_verify action, the run report, the inventory filters)."""
