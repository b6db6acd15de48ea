"""The build plan and its stage runners: full build, incremental update and dry run."""
