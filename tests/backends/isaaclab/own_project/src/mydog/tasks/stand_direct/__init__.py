"""Stand up from a crouch and hold it (direct workflow: the project's own DirectRLEnv subclass)."""
