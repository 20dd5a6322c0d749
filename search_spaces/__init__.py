"""The shipped search spaces, one YAML file each: installed inside the package as ``sweep.spaces`` and found by
name (``space=locomotion``). Copy one to start your own, and pass its path (``space=my_space.yaml``)."""
