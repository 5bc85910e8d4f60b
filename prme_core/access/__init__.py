"""Access: API keys that bind a credential to an owner and, optionally, to scopes."""
