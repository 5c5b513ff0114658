"""The NVIDIA driver: which source, branch and packages a node gets (driver, driver_choice), what the node shows
(driver_state), the kernels the next boot may use (driver_kernels), the package manager's health (pkghealth) and
the lifecycles the run reports (lifecycle). Imports only the shared ground (host, change, errors, gpu, nvidia,
version)."""
