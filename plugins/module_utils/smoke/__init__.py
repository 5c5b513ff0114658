"""The GPU smoke tests: what to run and what it means (smoke for the engine, smoke_pod for the pod) and the I/O on the
live node or through the API server (smoke_live, smoke_pod_live). Imports the shared ground, the runtime (its
config, the isolation door) and the stacks (each stack's resource)."""
