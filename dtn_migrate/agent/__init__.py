"""The DTN agent: wraps the transfer engine as an oslo.messaging service."""
