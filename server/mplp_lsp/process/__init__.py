"""This process: when it started, its log level, how it ends. Cheap to import: serve, watch and
the hooks load it before anything else."""
