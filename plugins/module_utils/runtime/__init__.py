"""The container runtime: the engine kubelet uses and every runtime file (runtime), what the running engine shows
(runtime_live), the CDI spec (cdi), NVIDIA's container toolkit repository and package (toolkit), who may ask for GPUs
by the variable (isolation) and the /dev/char links (devices). Imports the shared ground, the stacks' facts (which
stacks need the variable door) and the scheduler's patch helpers. TOML goes through maintained libraries (tomlio);
the module's steps and the plan between them are driven from the control machine (runtime_steps, runtime_args)."""
