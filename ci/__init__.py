"""The CI guard: ShellCheck, actionlint and the workflow-order checks, plus the ecosystem glue."""
