"""Floor 1, base: what every other floor uses and that uses nothing of the package: errors, the settings and
environment variables, the one hasher, the JSON documents' contract, the package's files, plotting.
"""
