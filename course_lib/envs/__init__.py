"""The course's verifiers environments, one self-contained file each (`load_environment(**kwargs)`)."""
