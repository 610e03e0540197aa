"""The `relmon` command and the tools around the two services: the CLI, `relmon run` (trial mode), doctor,
`relmon judge`/`eval`, digest dry-runs and export."""
