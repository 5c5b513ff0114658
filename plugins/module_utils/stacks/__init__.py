"""The GPU-sharing stacks: the catalog of what each stack deploys (stacks), the manifests' apiVersions by Kubernetes
version (manifests), NVIDIA's DRA driver (dra) and HAMi (hami). Imports the shared ground, MIG (mig strategies),
the runtime's isolation decision and the scheduler's variants."""
