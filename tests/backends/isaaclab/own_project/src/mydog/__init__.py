"""mydog: Isaac Lab tasks of a user's own project (a test fixture of sweep, laid out as Isaac Lab's template does)."""
