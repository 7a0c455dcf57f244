"""Example workflows for Parley (the chat-agent demo lives in ``support_agent``)."""
