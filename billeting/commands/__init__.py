"""The ``billeting`` command's sub-commands: one module per command group."""
