"""The CI guard and the ecosystem glue: where no-docker meets CI, test suites and mutation tools.

- ``guard``           ``no-docker guard``: runs ``tools`` (ShellCheck, actionlint) and
                      ``workflow_rules`` (T-19) over the files ``repo`` finds, prints ``findings``
- ``workflow_rules``  default-deny over jobs and steps from the YAML; which commands of a ``run:``
                      script are isolated or allowed is ``script_rules`` (tree-sitter-bash via
                      ``no_docker.mutants.bash_parser``)
- ``stanza``          ``no-docker stanza``: the re-exec line for bash test suites
- ``pytest_plugin``   ``pytest --no-docker`` (entry point ``pytest11``): stdlib and pytest only,
                      inert unless enabled
- ``cosmic_ray``      cosmic-ray's ``no-docker`` distributor (entry point ``cosmic_ray.distributors``)
                      and ``no-docker mutation-summary``: a refused run is never a killed mutant
                      (docs/mutation-testing.md); cosmic-ray imported only when a session runs
- ``action.yml``, ``workflows/guard.yml``  the composite action and workflow users copy
"""
